//! quench's configuration files: [`file`] reads TOML into typed configurations with errors that
//! name the file and the key; [`bundled`] holds the presets, example configurations and scenarios
//! built into the binary, opened by name or by path; [`reference`] renders every file's keys as
//! the configuration reference.
pub mod bundled;
pub mod file;
pub mod keys;
pub mod reference;

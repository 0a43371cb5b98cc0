//! Build facts for `quench --version`: the git commit the binary was built from, `unknown` when
//! the source is not a git checkout (a crate tarball, an exported tree).
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn main() {
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=QUENCH_GIT_COMMIT={commit}");
    // A commit or checkout moves HEAD or the branch it names (loose or packed).
    let mut watch = vec!["HEAD".to_string(), "packed-refs".to_string()];
    watch.extend(git(&["symbolic-ref", "-q", "HEAD"]));
    for f in watch {
        // Only files that exist: cargo reruns a script on every build for a missing one.
        if let Some(path) = git(&["rev-parse", "--git-path", &f]) {
            if std::path::Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
}

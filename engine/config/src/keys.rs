//! Configuration keys several kinds share (the sender's, the appliance's and the scenario's
//! files), described once for the configuration reference (`units::keys`).

use units::keys::{Key, KeyDefault, Range, Type};

/// A key naming a preset whose tables stand where the file writes none.
pub const PRESET: Key = Key {
    name: "preset",
    ty: Type::String,
    unit: "",
    default: KeyDefault::None,
    range: Range::Text("a bundled name or a file"),
    doc: "A parameter preset (`nvidia`, `dcqcn-paper`; a file is relative to this one) whose \
          tables stand where this file writes none.",
};

/// The host core's catch-up bound (`PacingConfig::max_catch_up`), the sender's and the
/// appliance's.
pub const MAX_CATCH_UP_US: Key = Key {
    name: "max_catch_up_us",
    ty: Type::Integer,
    unit: "us",
    default: KeyDefault::Value("50"),
    range: Range::Int(1, 1000000),
    doc: "How far a flow may fall behind its release times (the loop was off the CPU) and \
          still catch up at once; more is given up.",
};

/// A parameter table's key, no default.
const fn table(name: &'static str, doc: &'static str) -> Key {
    Key {
        name,
        ty: Type::Table,
        unit: "",
        default: KeyDefault::None,
        range: Range::Any,
        doc,
    }
}

pub const QCN_RP: Key = table(
    "qcn_rp",
    "The QCN reaction points: the `[qcn_rp]` parameter table, over the preset's.",
);
pub const DCQCN_RP: Key = table(
    "dcqcn_rp",
    "The DCQCN reaction points: the `[dcqcn_rp]` parameter table, over the preset's.",
);
pub const NP: Key = table(
    "np",
    "The DCQCN notification point: the `[np]` parameter table, over the preset's.",
);
pub const HPCC_RP: Key = table(
    "hpcc_rp",
    "The HPCC reaction points: the `[hpcc_rp]` parameter table, over the preset's.",
);
pub const TIMELY_RP: Key = table(
    "timely_rp",
    "The TIMELY reaction points: the `[timely_rp]` parameter table, over the preset's.",
);
pub const DCTCP_RP: Key = table(
    "dctcp_rp",
    "The DCTCP reaction points: the `[dctcp_rp]` parameter table, over the preset's.",
);
pub const PINT_RP: Key = table(
    "pint_rp",
    "The HPCC-PINT reaction points: the `[pint_rp]` parameter table, over the preset's.",
);

//! (Being written.)

use crate::api::RangeProtocol;

/// The protocols of this module.
pub fn protocols() -> Vec<RangeProtocol> {
    Vec::new()
}

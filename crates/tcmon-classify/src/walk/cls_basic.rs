//! `cls_basic.c`: a basic rule (its ematches are not replayed).

use tcmon_core::filter::Filter;

use super::cls_api::Test;
use super::Replay;

impl<'a> Replay<'a> {
    /// basic: matches every packet unless it has ematches, which are not evaluated (cmp reads
    /// packet bytes a packet description does not give).
    pub(crate) fn basic_test(_: &Replay<'a>, f: &Filter) -> Test {
        /// `TCA_BASIC_EMATCHES`
        const EMATCHES: u16 = 2;
        if let Some(e) = f.ematch.as_deref().filter(|e| !e.is_empty()) {
            return Test::Unknown(format!(
                "its ematches ({e}) are not evaluated, so what they match is not known"
            ));
        }
        let raw = f
            .undecoded
            .raw_attributes
            .iter()
            .filter(|a| a.at.starts_with("options"));
        let mut any = false;
        for a in raw {
            if a.kind == EMATCHES {
                return Test::Unknown(
                    "its ematches are not decoded, so what they match is not known".to_owned(),
                );
            }
            any = true;
        }
        if any || !f.undecoded.decode_errors.is_empty() {
            Test::Unknown("some of its options were not decoded".to_owned())
        } else {
            Test::Yes
        }
    }
}

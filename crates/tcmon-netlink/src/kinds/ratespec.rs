//! `struct tc_ratespec`, shared by HTB and TBF.

use crate::decode::Fixed;

pub(crate) const RATESPEC_LEN: usize = 12;

#[derive(Debug, Clone, Copy)]
pub(crate) struct RateSpecRaw {
    pub(crate) linklayer: u8,
    pub(crate) overhead: u16,
    pub(crate) mpu: u16,
    /// Bytes per second; saturates at u32::MAX when a 64-bit attribute carries the real rate.
    pub(crate) rate: u32,
}

impl RateSpecRaw {
    /// Layout: cell_log u8, linklayer u8, overhead u16, cell_align s16, mpu u16, rate u32.
    pub(crate) fn read(f: Fixed<'_>, off: usize) -> Self {
        RateSpecRaw {
            linklayer: f.u8(off + 1),
            overhead: f.u16(off + 2),
            mpu: f.u16(off + 6),
            rate: f.u32(off + 8),
        }
    }

    pub(crate) fn linklayer_name(self) -> &'static str {
        // TC_LINKLAYER_MASK keeps the low 4 bits
        match self.linklayer & 0x0F {
            1 => "ethernet",
            2 => "atm",
            _ => "unaware",
        }
    }
}

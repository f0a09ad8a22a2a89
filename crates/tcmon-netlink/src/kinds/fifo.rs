//! Structs sent bare in `TCA_OPTIONS`: `tc_fifo_qopt` (pfifo, bfifo, pfifo_head_drop) and
//! `tc_prio_qopt` (pfifo_fast, prio).

use tcmon_core::model::{Fifo, Prio, Undecoded};

use crate::decode::{short, Fixed};

const TCA_OPTIONS: u16 = 2;
/// `struct tc_prio_qopt`: int bands; __u8 priomap[TC_PRIO_MAX + 1].
const PRIO_LEN: usize = 4 + 16;

pub(crate) fn fifo(options: &[u8], und: &mut Undecoded) -> Option<Fifo> {
    match Fixed::new(options, 4) {
        Some(f) => Some(Fifo { limit: f.u32(0) }),
        None => {
            short(und, "options", TCA_OPTIONS, "tc_fifo_qopt", options, 4);
            None
        }
    }
}

pub(crate) fn prio(options: &[u8], und: &mut Undecoded) -> Option<Prio> {
    match Fixed::new(options, PRIO_LEN) {
        Some(f) => Some(Prio {
            bands: f.u32(0),
            priomap: options[4..PRIO_LEN].to_vec(),
        }),
        None => {
            short(
                und,
                "options",
                TCA_OPTIONS,
                "tc_prio_qopt",
                options,
                PRIO_LEN,
            );
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_limit() {
        let mut und = Undecoded::default();
        assert_eq!(
            fifo(&20u32.to_ne_bytes(), &mut und),
            Some(Fifo { limit: 20 })
        );
        assert_eq!(fifo(&[1, 2], &mut und), None);
        assert_eq!(und.raw_attributes[0].bytes, vec![1, 2]);
    }

    #[test]
    fn pfifo_fast_default_priomap() {
        // what `tc qdisc show` prints for pfifo_fast: bands 3 priomap 1 2 2 2 1 2 0 0 1 1 1 1 1 1 1 1
        let map = [1u8, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1];
        let mut b = 3u32.to_ne_bytes().to_vec();
        b.extend_from_slice(&map);
        let mut und = Undecoded::default();
        let p = prio(&b, &mut und).unwrap();
        assert_eq!(p.bands, 3);
        assert_eq!(p.priomap, map);
        assert!(prio(&b[..19], &mut und).is_none());
    }
}

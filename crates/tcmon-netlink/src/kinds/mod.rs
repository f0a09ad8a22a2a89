//! Kind-specific options and xstats. Known kinds decode into the model; anything else is kept
//! raw under its kind name, never dropped.

pub(crate) mod act;
mod cake;
pub(crate) mod cls;
mod codel;
mod drr;
mod dualpi2;
mod ematch;
mod fifo;
mod fq;
mod fq_codel;
mod hfsc;
mod htb;
mod netem;
mod pie;
mod qfq;
mod ratespec;
mod red;
mod sfq;
mod tbf;
pub(crate) mod u32;

use tcmon_core::model::{ClassDetail, QdiscDetail, Undecoded};
use tcmon_core::units::{Handle, TickLen};

use crate::decode::keep;

const TCA_OPTIONS: u16 = 2;
const TCA_XSTATS: u16 = 4;

/// The detail of a qdisc of `kind`. A decoder that reads the xstats takes them (`take()` in
/// its arm): xstats no decoder took, and the options of a kind tcmon does not know, are kept
/// raw.
pub(crate) fn qdisc_detail(
    kind: &str,
    handle: Handle,
    options: Option<&[u8]>,
    xstats: Option<&[u8]>,
    tick: TickLen,
    und: &mut Undecoded,
) -> Option<QdiscDetail> {
    let opts = options.unwrap_or_default();
    let mut xstats = xstats;
    let detail = match kind {
        "htb" => Some(QdiscDetail::Htb(htb::qdisc(handle, opts, und))),
        "tbf" => Some(QdiscDetail::Tbf(tbf::qdisc(opts, tick, und))),
        "pfifo" => fifo::fifo(opts, und).map(QdiscDetail::Pfifo),
        "bfifo" => fifo::fifo(opts, und).map(QdiscDetail::Bfifo),
        "pfifo_head_drop" => fifo::fifo(opts, und).map(QdiscDetail::PfifoHeadDrop),
        "pfifo_fast" => fifo::prio(opts, und).map(QdiscDetail::PfifoFast),
        "prio" => fifo::prio(opts, und).map(QdiscDetail::Prio),
        "fq_codel" => Some(QdiscDetail::FqCodel(Box::new(fq_codel::qdisc(
            options,
            xstats.take(),
            und,
        )))),
        // cake_mq: a root with one cake per transmit queue, all sharing its options, which it
        // dumps as cake's (its stats are the sum of theirs, without xstats)
        "cake" | "cake_mq" => Some(QdiscDetail::Cake(Box::new(cake::qdisc(
            options,
            xstats.take(),
            und,
        )))),
        "sfq" => Some(QdiscDetail::Sfq(sfq::qdisc(opts, und))),
        "codel" => Some(QdiscDetail::Codel(Box::new(codel::qdisc(
            options,
            xstats.take(),
            und,
        )))),
        "fq" => Some(QdiscDetail::Fq(Box::new(fq::qdisc(
            options,
            xstats.take(),
            und,
        )))),
        "dualpi2" => Some(QdiscDetail::DualPi2(Box::new(dualpi2::qdisc(
            options,
            xstats.take(),
            und,
        )))),
        "pie" => Some(QdiscDetail::Pie(Box::new(pie::qdisc(
            options,
            xstats.take(),
            und,
        )))),
        "red" => Some(QdiscDetail::Red(Box::new(red::qdisc(
            options,
            xstats.take(),
            und,
        )))),
        "netem" => Some(QdiscDetail::Netem(Box::new(netem::qdisc(
            opts,
            xstats.take(),
            tick,
            und,
        )))),
        "hfsc" => Some(QdiscDetail::Hfsc(hfsc::qdisc(handle, opts, und))),
        // drr and qfq qdiscs have neither options nor xstats (their classes do): anything
        // that comes is kept raw.
        _ => {
            keep_unknown(options, xstats, und);
            return None;
        }
    };
    // the known kinds read their options (their decoders keep what they do not know); xstats
    // no decoder took are kept raw
    keep_unknown(None, xstats, und);
    detail
}

/// The detail of a class of `kind`. A decoder takes the options and xstats it reads
/// (`take()` in its arm); whatever no decoder took is kept raw (fq_codel, cake and sfq
/// classes have no options in the kernel's dump, but any that come are kept).
pub(crate) fn class_detail(
    kind: &str,
    options: Option<&[u8]>,
    xstats: Option<&[u8]>,
    tick: TickLen,
    und: &mut Undecoded,
) -> Option<ClassDetail> {
    let (mut options, mut xstats) = (options, xstats);
    let detail = match kind {
        "htb" => Some(ClassDetail::Htb(htb::class(
            options.take(),
            xstats.take(),
            tick,
            und,
        ))),
        "fq_codel" => Some(ClassDetail::FqCodel(fq_codel::class(xstats.take(), und))),
        "cake" => Some(ClassDetail::Cake(cake::class(xstats.take(), und))),
        "sfq" => Some(ClassDetail::Sfq(sfq::class(xstats.take(), und))),
        "hfsc" => Some(ClassDetail::Hfsc(hfsc::class(
            options.take(),
            xstats.take(),
            und,
        ))),
        "drr" => Some(ClassDetail::Drr(drr::class(
            options.take(),
            xstats.take(),
            und,
        ))),
        "qfq" => Some(ClassDetail::Qfq(qfq::class(
            options.take(),
            xstats.take(),
            und,
        ))),
        _ => None,
    };
    keep_unknown(options, xstats, und);
    detail
}

fn keep_unknown(options: Option<&[u8]>, xstats: Option<&[u8]>, und: &mut Undecoded) {
    // An empty nest (ingress, clsact, mq) carries nothing worth keeping.
    if let Some(o) = options.filter(|o| !o.is_empty()) {
        keep(und, "options", TCA_OPTIONS, o);
    }
    if let Some(x) = xstats.filter(|x| !x.is_empty()) {
        keep(und, "xstats", TCA_XSTATS, x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A raw attribute: where, its type, its bytes.
    type Raw = (&'static str, u16, Vec<u8>);

    fn run(f: impl FnOnce(&mut Undecoded) -> bool) -> (bool, Vec<Raw>) {
        let mut und = Undecoded::default();
        let some = f(&mut und);
        assert!(und.decode_errors.is_empty(), "{und:?}");
        let raw = und
            .raw_attributes
            .into_iter()
            .map(|r| (r.at, r.kind, r.bytes))
            .collect();
        (some, raw)
    }

    #[test]
    fn class_options_no_decoder_reads_are_kept_raw() {
        let opts: &[u8] = &[8, 0, 1, 0, 1, 2, 3, 4];
        for kind in ["cake", "fq_codel", "sfq"] {
            let (some, raw) =
                run(|und| class_detail(kind, Some(opts), None, TickLen::default(), und).is_some());
            assert!(some, "{kind}");
            assert_eq!(raw, [("options", TCA_OPTIONS, opts.to_vec())], "{kind}");
        }
        // an empty nest carries nothing
        let (_, raw) =
            run(|und| class_detail("cake", Some(&[]), None, TickLen::default(), und).is_some());
        assert_eq!(raw, []);
        // a kind tcmon does not know keeps both
        let (some, raw) = run(|und| {
            class_detail("cbq", Some(opts), Some(&[1, 2]), TickLen::default(), und).is_some()
        });
        assert!(!some);
        assert_eq!(
            raw,
            [
                ("options", TCA_OPTIONS, opts.to_vec()),
                ("xstats", TCA_XSTATS, vec![1, 2])
            ]
        );
    }

    #[test]
    fn qdisc_xstats_no_decoder_reads_are_kept_raw() {
        // sfq's qdisc decoder reads no xstats: kept raw
        let (some, raw) = run(|und| {
            let opts = [0u8; 20]; // tc_sfq_qopt
            qdisc_detail(
                "sfq",
                Handle(0x0001_0000),
                Some(&opts),
                Some(&[5, 6]),
                TickLen::default(),
                und,
            )
            .is_some()
        });
        assert!(some);
        assert!(raw.contains(&("xstats", TCA_XSTATS, vec![5, 6])), "{raw:?}");
    }
}

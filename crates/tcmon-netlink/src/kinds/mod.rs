//! Kind-specific options and xstats. Known kinds decode into the model; anything else is kept
//! raw under its kind name, never dropped.

pub(crate) mod act;
mod cake;
pub(crate) mod cls;
mod codel;
mod drr;
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

pub(crate) fn qdisc_detail(
    kind: &str,
    handle: Handle,
    options: Option<&[u8]>,
    xstats: Option<&[u8]>,
    tick: TickLen,
    und: &mut Undecoded,
) -> Option<QdiscDetail> {
    let opts = options.unwrap_or_default();
    let detail = match kind {
        "htb" => Some(QdiscDetail::Htb(htb::qdisc(handle, opts, und))),
        "tbf" => Some(QdiscDetail::Tbf(tbf::qdisc(opts, tick, und))),
        "pfifo" => fifo::fifo(opts, und).map(QdiscDetail::Pfifo),
        "bfifo" => fifo::fifo(opts, und).map(QdiscDetail::Bfifo),
        "pfifo_head_drop" => fifo::fifo(opts, und).map(QdiscDetail::PfifoHeadDrop),
        "pfifo_fast" => fifo::prio(opts, und).map(QdiscDetail::PfifoFast),
        "prio" => fifo::prio(opts, und).map(QdiscDetail::Prio),
        "fq_codel" => Some(QdiscDetail::FqCodel(Box::new(fq_codel::qdisc(
            options, xstats, und,
        )))),
        "cake" => Some(QdiscDetail::Cake(Box::new(cake::qdisc(
            options, xstats, und,
        )))),
        "sfq" => Some(QdiscDetail::Sfq(sfq::qdisc(opts, und))),
        "codel" => Some(QdiscDetail::Codel(Box::new(codel::qdisc(
            options, xstats, und,
        )))),
        "fq" => Some(QdiscDetail::Fq(Box::new(fq::qdisc(options, xstats, und)))),
        "pie" => Some(QdiscDetail::Pie(Box::new(pie::qdisc(options, xstats, und)))),
        "red" => Some(QdiscDetail::Red(Box::new(red::qdisc(options, xstats, und)))),
        "netem" => Some(QdiscDetail::Netem(Box::new(netem::qdisc(
            opts, xstats, tick, und,
        )))),
        "hfsc" => Some(QdiscDetail::Hfsc(hfsc::qdisc(handle, opts, und))),
        // drr and qfq qdiscs have neither options nor xstats (their classes do): anything
        // that comes is kept raw below.
        _ => {
            keep_unknown(options, xstats, und);
            return None;
        }
    };
    // Kinds whose xstats tcmon does not decode keep them raw.
    if !matches!(
        kind,
        "fq_codel" | "cake" | "codel" | "fq" | "pie" | "red" | "netem"
    ) {
        if let Some(x) = xstats.filter(|x| !x.is_empty()) {
            keep(und, "xstats", TCA_XSTATS, x);
        }
    }
    detail
}

pub(crate) fn class_detail(
    kind: &str,
    options: Option<&[u8]>,
    xstats: Option<&[u8]>,
    tick: TickLen,
    und: &mut Undecoded,
) -> Option<ClassDetail> {
    match kind {
        "htb" => Some(ClassDetail::Htb(htb::class(options, xstats, tick, und))),
        "fq_codel" => Some(ClassDetail::FqCodel(fq_codel::class(xstats, und))),
        "cake" => Some(ClassDetail::Cake(cake::class(xstats, und))),
        "sfq" => Some(ClassDetail::Sfq(sfq::class(xstats, und))),
        "hfsc" => Some(ClassDetail::Hfsc(hfsc::class(options, xstats, und))),
        "drr" => Some(ClassDetail::Drr(drr::class(options, xstats, und))),
        "qfq" => Some(ClassDetail::Qfq(qfq::class(options, xstats, und))),
        _ => {
            keep_unknown(options, xstats, und);
            None
        }
    }
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

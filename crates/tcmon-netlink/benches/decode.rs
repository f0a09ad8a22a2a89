//! Decoder throughput on captured kernel messages (tests/fixtures/kernel-6.18): the per-object
//! cost of a poll beyond the kernel's own dump time.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tcmon_core::units::TickLen;
use tcmon_netlink::{decode_class, decode_filter, decode_qdisc};

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/kernel-6.18/{name}.bin",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("fixture")
}

fn decoders(c: &mut Criterion) {
    let tick = TickLen::default();
    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Elements(1));
    let class = fixture("class-htb-1_10");
    g.bench_function("htb class", |b| {
        b.iter(|| decode_class(black_box(&class), tick).unwrap());
    });
    let htb = fixture("qdisc-htb-1");
    g.bench_function("htb qdisc", |b| {
        b.iter(|| decode_qdisc(black_box(&htb), tick).unwrap());
    });
    let pfifo = fixture("qdisc-pfifo-10");
    g.bench_function("pfifo qdisc", |b| {
        b.iter(|| decode_qdisc(black_box(&pfifo), tick).unwrap());
    });
    let tbf = fixture("qdisc-tbf-20");
    g.bench_function("tbf qdisc", |b| {
        b.iter(|| decode_qdisc(black_box(&tbf), tick).unwrap());
    });
    let u32f = fixture("filter-u32-800_800");
    g.bench_function("u32 filter", |b| {
        b.iter(|| decode_filter(black_box(&u32f)).unwrap());
    });
    g.finish();
}

criterion_group!(benches, decoders);
criterion_main!(benches);

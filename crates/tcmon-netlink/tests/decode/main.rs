//! The decoders against what a real kernel sends, one test binary: ethtool's feature replies
//! (live, with `ethtool -k` as the oracle) and the captured tc messages of `../fixtures/`.

mod ethtool;
mod fixtures;

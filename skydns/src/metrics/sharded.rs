//! Counters and histograms for the series counted on every query, split in
//! shards: each thread adds to its own cache lines, so the UDP threads never
//! contend on a metric (prometheus-client's `Histogram` takes a mutex per
//! observation, and a shared atomic bounces between cores). A scrape sums
//! the shards. Histogram sums are integers: whole bytes, or microseconds.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Shards per metric: threads past this share one (by thread, in turn).
const SHARDS: usize = 16;

/// This thread's shard.
fn shard() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        static SHARD: usize = NEXT.fetch_add(1, Ordering::Relaxed) % SHARDS;
    }
    SHARD.with(|s| *s)
}

/// One shard's value, on cache lines of its own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct Line<T>(T);

/// A counter of one shard per thread.
#[derive(Clone, Debug, Default)]
pub(super) struct ShardedCounter {
    shards: Arc<[Line<AtomicU64>; SHARDS]>,
}

impl ShardedCounter {
    pub(super) fn inc(&self) {
        self.shards[shard()].0.fetch_add(1, Ordering::Relaxed);
    }

    /// The sum of the shards.
    pub(super) fn get(&self) -> u64 {
        self.shards
            .iter()
            .map(|s| s.0.load(Ordering::Relaxed))
            .sum()
    }
}

impl TypedMetric for ShardedCounter {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for ShardedCounter {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        encoder.encode_counter::<NoLabelSet, _, u64>(&self.get(), None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

/// A histogram of fixed buckets, one shard per thread.
#[derive(Clone, Debug)]
pub(super) struct ShardedHistogram {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    bounds: Vec<f64>,
    /// Units of the sum per unit observed: 1 for bytes, 1e6 for seconds
    /// (a u64 of microseconds lasts 584,000 years).
    scale: f64,
    shards: Vec<Line<Counts>>,
}

/// One shard: a count per bucket (the last is `+Inf`) and the sum.
#[derive(Debug)]
struct Counts {
    buckets: Box<[AtomicU64]>,
    sum: AtomicU64,
}

impl ShardedHistogram {
    /// A histogram of seconds with these upper bounds (ascending; `+Inf`
    /// is added), summed in microseconds.
    pub(super) fn seconds(bounds: impl IntoIterator<Item = f64>) -> Self {
        Self::new(bounds, 1e6)
    }

    /// A histogram of bytes, summed in whole bytes.
    pub(super) fn bytes(bounds: impl IntoIterator<Item = f64>) -> Self {
        Self::new(bounds, 1.0)
    }

    fn new(bounds: impl IntoIterator<Item = f64>, scale: f64) -> Self {
        let bounds: Vec<f64> = bounds.into_iter().collect();
        let shards = (0..SHARDS)
            .map(|_| {
                Line(Counts {
                    buckets: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
                    sum: AtomicU64::new(0),
                })
            })
            .collect();
        ShardedHistogram {
            inner: Arc::new(Inner {
                bounds,
                scale,
                shards,
            }),
        }
    }

    /// Counts `v` (a negative or NaN value counts as 0).
    pub(super) fn observe(&self, v: f64) {
        let v = if v.is_nan() { 0.0 } else { v.max(0.0) };
        let i = self.inner.bounds.partition_point(|b| *b < v);
        let counts = &self.inner.shards[shard()].0;
        counts.buckets[i].fetch_add(1, Ordering::Relaxed);
        // `as` saturates: a value past u64 units sums as the maximum.
        let units = (v * self.inner.scale).round() as u64;
        counts.sum.fetch_add(units, Ordering::Relaxed);
    }
}

impl TypedMetric for ShardedHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for ShardedHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let mut counts = vec![0u64; self.inner.bounds.len() + 1];
        let mut sum = 0u64;
        for shard in &self.inner.shards {
            for (total, c) in counts.iter_mut().zip(shard.0.buckets.iter()) {
                *total += c.load(Ordering::Relaxed);
            }
            sum = sum.saturating_add(shard.0.sum.load(Ordering::Relaxed));
        }
        let bounds = self.inner.bounds.iter().copied().chain([f64::INFINITY]);
        let buckets: Vec<(f64, u64)> = bounds.zip(counts.iter().copied()).collect();
        let count = counts.iter().sum();
        let sum = sum as f64 / self.inner.scale;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(
        name: &str,
        metric: impl EncodeMetric + Send + Sync + std::fmt::Debug + 'static,
    ) -> String {
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register(name, "test", metric);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        text
    }

    #[test]
    fn values_fall_in_the_first_bucket_that_holds_them_and_sum_exactly() {
        let h = ShardedHistogram::seconds([1.0, 2.0]);
        for v in [0.5, 1.0, 1.5, 2.5, f64::NAN, -3.0] {
            h.observe(v);
        }
        let text = render("h", h);
        for line in [
            "h_sum 5.5",
            "h_count 6",
            "h_bucket{le=\"1.0\"} 4",
            "h_bucket{le=\"2.0\"} 5",
            "h_bucket{le=\"+Inf\"} 6",
        ] {
            assert!(text.contains(line), "{line} in\n{text}");
        }
    }

    #[test]
    fn a_byte_histogram_sums_whole_bytes() {
        let h = ShardedHistogram::bytes([512.0]);
        h.observe(500.0);
        h.observe(1e15);
        let text = render("b", h);
        assert!(text.contains("b_sum 1000000000000500.0"), "{text}");
    }

    #[test]
    fn every_thread_s_additions_are_summed() {
        let (c, h) = (ShardedCounter::default(), ShardedHistogram::seconds([1.0]));
        std::thread::scope(|s| {
            for _ in 0..SHARDS + 3 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        c.inc();
                        h.observe(0.5);
                    }
                });
            }
        });
        let n = (SHARDS + 3) * 1000;
        assert_eq!(c.get(), n as u64);
        let text = render("h", h);
        assert!(text.contains(&format!("h_count {n}")), "{text}");
        assert!(text.contains(&format!("h_sum {}", n / 2)), "{text}");
        assert!(render("c", c).contains(&format!("c_total {n}")));
    }
}

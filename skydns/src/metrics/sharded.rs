//! Counters and histograms for the series counted on every query, split in
//! shards: each thread adds to its own cache lines, without a locked
//! instruction, so the UDP threads never contend on a metric
//! (prometheus-client's `Histogram` takes a mutex per observation, and a
//! shared atomic bounces between cores). A scrape sums the shards.
//! Histogram sums are integers: whole bytes, or nanoseconds.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Shards per metric: the first `SHARDS - 1` threads to count own one
/// each, and the threads after them share the last.
const SHARDS: usize = 16;

/// This thread's shard, and whether no other thread writes it.
#[derive(Clone, Copy)]
struct Shard {
    index: usize,
    own: bool,
}

impl Shard {
    fn current() -> Shard {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        thread_local! {
            static SHARD: Shard = match NEXT.fetch_add(1, Ordering::Relaxed) {
                n if n < SHARDS - 1 => Shard { index: n, own: true },
                _ => Shard { index: SHARDS - 1, own: false },
            };
        }
        SHARD.with(|s| *s)
    }

    /// Adds `v` to `a`, a value of this shard: a plain load and store when
    /// the shard is this thread's own (a locked add was most of the cost
    /// of an observation), else an atomic add.
    fn add(self, a: &AtomicU64, v: u64) {
        if self.own {
            a.store(a.load(Ordering::Relaxed).wrapping_add(v), Ordering::Relaxed);
        } else {
            a.fetch_add(v, Ordering::Relaxed);
        }
    }
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
        let shard = Shard::current();
        shard.add(&self.shards[shard.index].0, 1);
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

/// A histogram of fixed buckets, one shard per thread. Values and bounds
/// are whole units (nanoseconds or bytes), so an observation is an integer
/// search and two atomic adds, with no float arithmetic.
#[derive(Clone, Debug)]
pub(super) struct ShardedHistogram {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// Upper bounds in units, ascending (`+Inf` is the last bucket).
    bounds: Vec<u64>,
    /// Units per unit exposed: 1e9 for seconds (a u64 of nanoseconds
    /// lasts 584 years), 1 for bytes.
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
    /// is added), counted in nanoseconds: a bound is exact to the nanosecond.
    pub(super) fn seconds(bounds: impl IntoIterator<Item = f64>) -> Self {
        Self::new(bounds, 1e9)
    }

    /// A histogram of bytes.
    pub(super) fn bytes(bounds: impl IntoIterator<Item = f64>) -> Self {
        Self::new(bounds, 1.0)
    }

    fn new(bounds: impl IntoIterator<Item = f64>, scale: f64) -> Self {
        // `as` saturates: a bound past u64 units holds everything.
        let bounds: Vec<u64> = (bounds.into_iter())
            .map(|b| (b * scale).round() as u64)
            .collect();
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

    /// Counts a duration (in a histogram of seconds).
    pub(super) fn observe_duration(&self, d: Duration) {
        self.observe_units(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Counts a size (in a histogram of bytes).
    pub(super) fn observe_bytes(&self, n: usize) {
        self.observe_units(n as u64);
    }

    /// Counts `v` units: in the first bucket whose bound is at least `v`.
    fn observe_units(&self, v: u64) {
        let i = self.inner.bounds.partition_point(|b| *b < v);
        let shard = Shard::current();
        let counts = &self.inner.shards[shard.index].0;
        shard.add(&counts.buckets[i], 1);
        shard.add(&counts.sum, v);
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
        let scale = self.inner.scale;
        let bounds = (self.inner.bounds.iter().map(|b| *b as f64 / scale)).chain([f64::INFINITY]);
        let buckets: Vec<(f64, u64)> = bounds.zip(counts.iter().copied()).collect();
        let count = counts.iter().sum();
        let sum = sum as f64 / scale;
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
        let h = ShardedHistogram::seconds([0.00025, 1.0, 2.0]);
        let ms = Duration::from_millis;
        for d in [ms(500), ms(1000), ms(1500), ms(2500)] {
            h.observe_duration(d);
        }
        // A bound holds itself, and not a nanosecond more.
        h.observe_duration(Duration::from_micros(250));
        h.observe_duration(Duration::from_nanos(250_001));
        let text = render("h", h);
        for line in [
            "h_sum 5.500500001",
            "h_count 6",
            "h_bucket{le=\"0.00025\"} 1",
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
        h.observe_bytes(512);
        h.observe_bytes(513);
        h.observe_bytes(1 << 50);
        let text = render("b", h);
        assert!(text.contains("b_sum 1125899906843649.0"), "{text}");
        assert!(text.contains("b_bucket{le=\"512.0\"} 1"), "{text}");
    }

    #[test]
    fn every_thread_s_additions_are_summed() {
        let (c, h) = (ShardedCounter::default(), ShardedHistogram::seconds([1.0]));
        std::thread::scope(|s| {
            for _ in 0..SHARDS + 3 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        c.inc();
                        h.observe_duration(Duration::from_millis(500));
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

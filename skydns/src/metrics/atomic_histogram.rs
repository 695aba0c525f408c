//! A histogram of atomics, for the series counted on every query:
//! prometheus-client's `Histogram` takes a mutex per observation, which the
//! UDP threads would contend on. Observing here is a bucket search and two
//! atomic adds; the sum is kept in millionths, exact for bytes and to the
//! microsecond for seconds.

use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::{MetricType, TypedMetric};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Fixed buckets (their upper bounds), a count per bucket and the sum.
#[derive(Clone, Debug)]
pub(super) struct AtomicHistogram {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    bounds: Vec<f64>,
    /// One more than `bounds`: the last is `+Inf`.
    counts: Vec<AtomicU64>,
    /// The sum of the observations, in millionths.
    sum_micros: AtomicU64,
}

impl AtomicHistogram {
    /// A histogram with these upper bounds (ascending; `+Inf` is added).
    pub(super) fn new(bounds: impl IntoIterator<Item = f64>) -> Self {
        let bounds: Vec<f64> = bounds.into_iter().collect();
        let counts = (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect();
        AtomicHistogram {
            inner: Arc::new(Inner {
                bounds,
                counts,
                sum_micros: AtomicU64::new(0),
            }),
        }
    }

    /// Counts `v` (a negative or NaN value counts as 0).
    pub(super) fn observe(&self, v: f64) {
        let v = if v.is_nan() { 0.0 } else { v.max(0.0) };
        let i = self.inner.bounds.partition_point(|b| *b < v);
        self.inner.counts[i].fetch_add(1, Ordering::Relaxed);
        // `as` saturates: a value past u64 millionths sums as the maximum.
        let micros = (v * 1e6).round() as u64;
        self.inner.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }
}

impl TypedMetric for AtomicHistogram {
    const TYPE: MetricType = MetricType::Histogram;
}

impl EncodeMetric for AtomicHistogram {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        let counts: Vec<u64> = (self.inner.counts.iter())
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        let bounds = self.inner.bounds.iter().copied().chain([f64::INFINITY]);
        let buckets: Vec<(f64, u64)> = bounds.zip(counts.iter().copied()).collect();
        let count = counts.iter().sum();
        let sum = self.inner.sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        encoder.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        Self::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_fall_in_the_first_bucket_that_holds_them_and_sum_exactly() {
        let h = AtomicHistogram::new([1.0, 2.0]);
        for v in [0.5, 1.0, 1.5, 2.5, f64::NAN, -3.0] {
            h.observe(v);
        }
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register("h", "test", h);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
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
}

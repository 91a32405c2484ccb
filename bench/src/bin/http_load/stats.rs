//! Latency samples and the process setting that makes short sleeps precise.

/// Nanosecond samples; percentiles by sorting (a run has at most a few
/// hundred thousand, so a histogram is not needed).
#[derive(Default)]
pub(crate) struct Samples(Vec<u64>);

impl Samples {
    /// Adds samples.
    pub(crate) fn extend(&mut self, more: Vec<u64>) {
        self.0.extend(more);
    }

    /// Number of samples.
    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    /// The `p` quantile (0.0..=1.0) in nanoseconds, nearest rank; 0 when empty.
    pub(crate) fn percentile(&mut self, p: f64) -> f64 {
        if self.0.is_empty() {
            return 0.0;
        }
        self.0.sort_unstable();
        let idx = ((self.0.len() as f64 * p).ceil() as usize).clamp(1, self.0.len()) - 1;
        self.0[idx] as f64
    }
}

/// Lowers this thread's timer slack from Linux's default 50 µs to 1 µs, so
/// `thread::sleep` wakes up close to when a request is due. Threads spawned
/// afterwards inherit it. Best effort: older kernels lack the file.
pub(crate) fn reduce_timer_slack() {
    if let Err(e) = std::fs::write("/proc/self/timerslack_ns", "1000") {
        eprintln!(
            "note: could not lower the timer slack ({e}); send times may be up to 50 µs late"
        );
    }
}

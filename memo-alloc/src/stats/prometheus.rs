//! [`Stats`] in the Prometheus text exposition format (version 0.0.4), for a service's
//! `/metrics`.

use std::fmt::{self, Display, Write};

use crate::stats::reasons::{AbandonReason, PlanRejection};
use crate::stats::snapshot::Stats;

impl Stats {
    /// The counters in the Prometheus text exposition format: one metric a counter (named
    /// `memo_*`, with `# HELP` and `# TYPE` lines), those by reason or kind as one metric
    /// with a label.
    ///
    /// ```
    /// let text = memo_alloc::Stats::default().to_prometheus();
    /// assert!(text.contains("# TYPE memo_slab_hits_total counter\nmemo_slab_hits_total 0\n"));
    /// assert!(text.contains("memo_misses_total{reason=\"too_large\"} 0\n"));
    /// assert!(text.contains("memo_passes_total{mode=\"replayed\"} 0\n"));
    /// ```
    pub fn to_prometheus(&self) -> String {
        let mut text = String::with_capacity(4096);
        // Writing to a `String` does not fail.
        let _ = self.write_prometheus(&mut text);
        text
    }

    /// Writes [`Stats::to_prometheus`]'s text to `out` (after, say, a service's own
    /// metrics).
    pub fn write_prometheus(&self, out: &mut impl Write) -> fmt::Result {
        let mut m = Exposition { out };
        m.gauge(
            "memo_slab_share",
            "Share of the allocations made in replayed passes that were served from slabs.",
            self.slab_share(),
        )?;
        let passes = [
            ("profiled", self.passes_profiled),
            ("replayed", self.passes_replayed),
            ("backend", self.passes_backend),
        ];
        m.counters(
            "memo_passes_total",
            "Passes by how they ran.",
            "mode",
            passes,
        )?;
        m.counter(
            "memo_pass_allocations_total",
            "Allocations made inside passes (replayed, profiled or on the backend).",
            self.pass_allocations(),
        )?;
        m.counter(
            "memo_replay_allocations_total",
            "Allocations made inside replayed passes.",
            self.replay_allocations,
        )?;
        m.counter(
            "memo_profiled_allocations_total",
            "Allocations made inside profiled passes.",
            self.profiled_allocations,
        )?;
        m.counter(
            "memo_backend_pass_allocations_total",
            "Allocations made inside passes that ran on the backend.",
            self.backend_pass_allocations,
        )?;
        m.counter(
            "memo_slab_hits_total",
            "Allocations served from slabs.",
            self.slab_hits,
        )?;
        m.counter(
            "memo_slab_bytes_total",
            "Bytes served from slabs.",
            self.slab_bytes,
        )?;
        let misses = self.misses_by_reason.iter().map(|(r, n)| (r.name(), n));
        m.counters(
            "memo_misses_total",
            "Allocations of replayed passes served by the backend, by reason.",
            "reason",
            misses,
        )?;
        let abandoned = AbandonReason::ALL.map(|r| (r.name(), self.profiles_abandoned_for(r)));
        m.counters(
            "memo_profiles_abandoned_total",
            "Profiles not planned, by reason.",
            "reason",
            abandoned,
        )?;
        m.counter(
            "memo_replays_abandoned_total",
            "Replayed passes that unwound or whose thread exited.",
            self.replays_abandoned,
        )?;
        self.write_plans(&mut m)?;
        self.write_memory(&mut m)
    }

    /// The plan files, the plan cache and the plans' slots.
    fn write_plans<W: Write>(&self, m: &mut Exposition<'_, W>) -> fmt::Result {
        m.counter(
            "memo_plan_files_loaded_total",
            "Plan files loaded from MEMO_PLAN_DIR.",
            self.plan_files_loaded,
        )?;
        let rejected = PlanRejection::ALL.map(|r| (r.name(), self.plan_files_rejected_for(r)));
        m.counters(
            "memo_plan_files_rejected_total",
            "Plan files not loaded, by reason.",
            "reason",
            rejected,
        )?;
        m.gauge("memo_plans", "Keys holding a plan.", self.plans)?;
        m.gauge(
            "memo_retired_plans",
            "Plans replaced or evicted, not yet freed.",
            self.retired_plans,
        )?;
        m.counter(
            "memo_evictions_total",
            "Plans evicted from the plan cache.",
            self.evictions,
        )?;
        m.counter(
            "memo_churn_total",
            "Keys profiled again after their plan was evicted.",
            self.churn,
        )?;
        m.counter(
            "memo_admissions_refused_total",
            "Profiles not started because the plan cache was full of keys used more often.",
            self.admissions_refused,
        )?;
        m.counter(
            "memo_slots_demoted_total",
            "Slots served by the backend after their blocks kept outliving passes.",
            self.slots_demoted,
        )
    }

    /// The slab memory.
    fn write_memory<W: Write>(&self, m: &mut Exposition<'_, W>) -> fmt::Result {
        m.gauge(
            "memo_slab_instances",
            "Slab instances in existence, retired plans' included.",
            self.slabs,
        )?;
        m.gauge(
            "memo_slab_instances_pinned",
            "Slab instances put back with live slots.",
            self.instances_pinned,
        )?;
        m.gauge(
            "memo_slab_resident_bytes",
            "Bytes of slab memory resident (instances' blocks and idle blocks).",
            self.slab_resident_bytes,
        )?;
        m.gauge(
            "memo_slab_idle_blocks",
            "Blocks of slab memory idle, waiting for the next pass of any key.",
            self.idle_blocks,
        )?;
        m.gauge(
            "memo_slab_reserved_bytes",
            "Bytes of address space reserved for slabs.",
            self.reserved_bytes,
        )?;
        m.counter(
            "memo_pages_returned_bytes_total",
            "Bytes of pinned instances' pages returned to the OS.",
            self.pages_returned_bytes,
        )?;
        m.counter(
            "memo_parks_total",
            "Times an async pass gave its slab memory back between two polls.",
            self.parks,
        )
    }
}

/// Metrics written one after another: a header, then the samples.
struct Exposition<'a, W> {
    out: &'a mut W,
}

impl<W: Write> Exposition<'_, W> {
    fn header(&mut self, name: &str, kind: &str, help: &str) -> fmt::Result {
        writeln!(self.out, "# HELP {name} {help}")?;
        writeln!(self.out, "# TYPE {name} {kind}")
    }

    fn gauge(&mut self, name: &str, help: &str, value: impl Display) -> fmt::Result {
        self.header(name, "gauge", help)?;
        writeln!(self.out, "{name} {value}")
    }

    fn counter(&mut self, name: &str, help: &str, value: u64) -> fmt::Result {
        self.header(name, "counter", help)?;
        writeln!(self.out, "{name} {value}")
    }

    /// One counter, a sample per value of `label`.
    fn counters<'l>(
        &mut self,
        name: &str,
        help: &str,
        label: &str,
        samples: impl IntoIterator<Item = (&'l str, u64)>,
    ) -> fmt::Result {
        self.header(name, "counter", help)?;
        for (value, n) in samples {
            writeln!(self.out, "{name}{{{label}=\"{value}\"}} {n}")?;
        }
        Ok(())
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Every sample line is `name value` or `name{label="value"} value` of a metric whose
    /// `# HELP` and `# TYPE` came before it, and every counter of `Stats` is there.
    #[test]
    fn the_text_is_well_formed_and_complete() {
        let mut s = Stats {
            slab_hits: 7,
            replay_allocations: 10,
            ..Stats::default()
        };
        s.misses_by_reason.overlap = 3;
        s.profiles_abandoned[AbandonReason::Bound as usize] = 2;
        let text = s.to_prometheus();
        let mut typed = std::collections::HashSet::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                assert!(["counter", "gauge"].contains(&kind), "{line}");
                assert_eq!(kind == "counter", name.ends_with("_total"), "{line}");
                typed.insert(name.to_string());
                continue;
            }
            if line.starts_with("# HELP ") {
                continue;
            }
            let (sample, value) = line.rsplit_once(' ').unwrap();
            let name = sample.split('{').next().unwrap();
            assert!(typed.contains(name), "{line}: no # TYPE before it");
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
        assert!(text.contains("memo_slab_hits_total 7\n"));
        assert!(text.contains("memo_misses_total{reason=\"overlap\"} 3\n"));
        assert!(text.contains("memo_profiles_abandoned_total{reason=\"bound\"} 2\n"));
        assert!(text.contains("memo_slab_share 0.7\n"));
        // Every field of `Stats` is in the text: the three pass counts as one metric's
        // labels, `misses` as the sum of `memo_misses_total`'s, and two metrics more (the
        // slab share, the pass allocations together).
        let fields = serde_json::to_value(s).unwrap().as_object().unwrap().len();
        assert_eq!(typed.len(), fields - 2 - 1 + 2, "{typed:?}");
    }
}

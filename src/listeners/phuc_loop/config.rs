//! [`LoopConfig`]: the loop controller's roles, workspace, profile and budgets (seed 002 §6),
//! and the profile scaling with its clamps (§6.2).

use std::path::PathBuf;

use rust_decimal::Decimal;
use serde::Deserialize;

/// A budget profile (§6.2 `profile_budget_scaling`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// No reduction.
    #[default]
    Strict,
    /// Sweeps and tool calls halved, clamped; a budget-reduction log is written.
    Fast,
    /// Sweeps × 0.7, tool calls × 0.8.
    BenchmarkAdapt,
}

impl Profile {
    /// `(sweep_budgets_scale, tool_call_budget_scale)`.
    fn scales(self) -> (Decimal, Decimal) {
        match self {
            Self::Strict => (Decimal::ONE, Decimal::ONE),
            Self::Fast => (Decimal::new(5, 1), Decimal::new(5, 1)),
            Self::BenchmarkAdapt => (Decimal::new(7, 1), Decimal::new(8, 1)),
        }
    }

    /// The profile's name as the seed writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Strict => "strict",
            Self::Fast => "fast",
            Self::BenchmarkAdapt => "benchmark_adapt",
        }
    }
}

/// §6.1's budget parameters; the defaults are the seed's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LoopBudget {
    /// Iterations (Scout→Solver→Skeptic cycles).
    pub max_iterations: u64,
    /// Tool calls one iteration's threads may make together.
    pub max_tool_calls_per_iteration: u64,
    /// Seconds one iteration may take.
    pub max_seconds_per_iteration: u64,
    /// Seconds the whole loop may take.
    pub max_total_seconds: u64,
    /// Tool calls across all iterations.
    pub max_total_tool_calls: u64,
}

impl Default for LoopBudget {
    fn default() -> Self {
        Self {
            max_iterations: 10,
            max_tool_calls_per_iteration: 80,
            max_seconds_per_iteration: 1800,
            max_total_seconds: 14_400,
            max_total_tool_calls: 500,
        }
    }
}

/// §6.2 `clamp_rules`: "never fewer than 3 iterations", "40 tool calls per iteration", "10
/// minutes per iteration".
const CLAMP_MIN_ITERATIONS: u64 = 3;
const CLAMP_MIN_TOOL_CALLS: u64 = 40;
const CLAMP_MIN_SECONDS: u64 = 600;

impl LoopBudget {
    /// The budget under `profile`, with one budget-reduction log line per parameter it
    /// reduced. A scaled value is `ceil(base × scale)`, never below the clamp minimum — unless
    /// the base itself is below it, which a profile does not raise.
    pub fn scaled(&self, profile: Profile) -> (LoopBudget, Vec<String>) {
        let (sweep, tools) = profile.scales();
        let mut log = Vec::new();
        let mut scale = |name: &str, base: u64, by: Decimal, clamp: Option<u64>| {
            let ceil = (Decimal::from(base) * by).ceil();
            let scaled = u64::try_from(ceil).unwrap_or(base);
            let value = clamp.map_or(scaled, |min| scaled.max(base.min(min)));
            if value != base {
                let clamp = clamp.map_or(String::new(), |m| format!(", clamp_min {m}"));
                log.push(format!(
                    "{name}: {base} -> {value} (profile {}, scale {by}{clamp})",
                    profile.as_str()
                ));
            }
            value
        };
        let b = LoopBudget {
            max_iterations: scale(
                "max_iterations",
                self.max_iterations,
                sweep,
                Some(CLAMP_MIN_ITERATIONS),
            ),
            max_tool_calls_per_iteration: scale(
                "max_tool_calls_per_iteration",
                self.max_tool_calls_per_iteration,
                tools,
                Some(CLAMP_MIN_TOOL_CALLS),
            ),
            max_seconds_per_iteration: scale(
                "max_seconds_per_iteration",
                self.max_seconds_per_iteration,
                sweep,
                Some(CLAMP_MIN_SECONDS),
            ),
            max_total_seconds: scale("max_total_seconds", self.max_total_seconds, sweep, None),
            max_total_tool_calls: scale(
                "max_total_tool_calls",
                self.max_total_tool_calls,
                tools,
                None,
            ),
        };
        (b, log)
    }
}

/// How a loop controller runs: who plays each role, where its files go, its profile and
/// budgets. In an organism file, the `[listener.loop]` table of a `kind = "loop"` listener.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopConfig {
    /// The listener that plays the Scout (§7.1: reads AGENTS.md and the state, plans).
    pub scout: String,
    /// The listener that plays the Solver (executes the plan, produces artifacts).
    pub solver: String,
    /// The listener that plays the Skeptic (verifies, assigns lanes, measures the residual).
    pub skeptic: String,
    /// The loop's folder: AGENTS.md, `evidence/loop/`, `scratch/` and the artifacts.
    pub workspace: PathBuf,
    /// `strict` (default), `fast` or `benchmark_adapt`.
    #[serde(default)]
    pub profile: Profile,
    /// The budget before the profile scales it.
    #[serde(default)]
    pub budget: LoopBudget,
    /// Disk usage above which the loop stops (§6.1 `disk_usage_fraction_exceeds: 0.90`), as a
    /// decimal string.
    #[serde(default = "default_disk_limit")]
    pub disk_usage_limit: Decimal,
    /// AGENTS.md size, in estimated tokens (four characters each), above which it is compacted
    /// (§5.3: 8 000).
    #[serde(default = "default_compaction_tokens")]
    pub compaction_tokens: u64,
}

fn default_disk_limit() -> Decimal {
    Decimal::new(90, 2)
}

fn default_compaction_tokens() -> u64 {
    8_000
}

impl LoopConfig {
    /// A configuration with the seed's defaults: the three role listeners and the workspace.
    pub fn new(
        scout: impl Into<String>,
        solver: impl Into<String>,
        skeptic: impl Into<String>,
        workspace: impl Into<PathBuf>,
    ) -> Self {
        Self {
            scout: scout.into(),
            solver: solver.into(),
            skeptic: skeptic.into(),
            workspace: workspace.into(),
            profile: Profile::default(),
            budget: LoopBudget::default(),
            disk_usage_limit: default_disk_limit(),
            compaction_tokens: default_compaction_tokens(),
        }
    }

    /// The three role listeners, Scout first.
    pub fn roles(&self) -> [&str; 3] {
        [&self.scout, &self.solver, &self.skeptic]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// §6.2: "fast: … max_iterations: 5 # ceil(10 * 0.5); clamp_min = 3", "max_tool_calls_clamp_min:
    /// 40", "max_seconds_clamp_min: 600", "must_emit_budget_reduction_log: true".
    #[test]
    fn the_fast_profile_halves_and_clamps() {
        let (fast, log) = LoopBudget::default().scaled(Profile::Fast);
        assert_eq!(fast.max_iterations, 5);
        assert_eq!(fast.max_tool_calls_per_iteration, 40);
        assert_eq!(fast.max_seconds_per_iteration, 900);
        assert_eq!(log.len(), 5, "{log:?}");
        assert_eq!(
            log[0],
            "max_iterations: 10 -> 5 (profile fast, scale 0.5, clamp_min 3)"
        );
        let small = LoopBudget {
            max_iterations: 4,
            max_tool_calls_per_iteration: 50,
            max_seconds_per_iteration: 700,
            ..LoopBudget::default()
        };
        let (clamped, _) = small.scaled(Profile::Fast);
        assert_eq!(
            (
                clamped.max_iterations,
                clamped.max_tool_calls_per_iteration,
                clamped.max_seconds_per_iteration
            ),
            (3, 40, 600),
            "ceil(4 × 0.5) = 2 is clamped to 3, 25 to 40, 350 to 600"
        );
        let (tiny, _) = LoopBudget {
            max_iterations: 2,
            ..LoopBudget::default()
        }
        .scaled(Profile::Fast);
        assert_eq!(tiny.max_iterations, 2, "a profile never raises a budget");
        let (strict, log) = LoopBudget::default().scaled(Profile::Strict);
        assert_eq!((strict, log.len()), (LoopBudget::default(), 0));
        let (bench, _) = LoopBudget::default().scaled(Profile::BenchmarkAdapt);
        assert_eq!(bench.max_iterations, 7, "ceil(10 * 0.7)");
    }
}

//! The report: one [`Figure`] per measured number, printed as a table and merged into
//! `target/agentpump-bench.json` (an array of objects, one per figure id; a bench binary
//! replaces the objects it measured and keeps the others, so separate binaries accumulate).

use std::path::PathBuf;

use serde_json::{Value, json};

use super::{Config, median};

/// Whether more or less is better for a figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    /// A rate.
    Higher,
    /// A time, a size.
    Lower,
}

/// One measured figure: the median of its runs, its baseline's median from the same runs, and
/// the target, if it has one.
#[derive(Debug, Clone)]
pub struct Figure {
    /// `"1"`, `"3c"`, `"7"`, …: figure number of the issue, a letter for each row of a figure.
    pub id: String,
    /// What is measured, in words.
    pub name: String,
    /// Unit of the value and of the baseline.
    pub unit: String,
    /// Whether more is better.
    pub better: Better,
    /// One value per run.
    pub samples: Vec<f64>,
    /// One baseline value per run (empty when the figure has no baseline).
    pub baseline_samples: Vec<f64>,
    /// What the baseline is, in words.
    pub baseline_name: String,
    /// The target as the issue states it, and whether the value meets it.
    pub target: Option<(String, bool)>,
    /// Overrides the ratio value / baseline (for figures whose ratio is not against the baseline).
    pub ratio_override: Option<(f64, String)>,
    /// Sizes and settings.
    pub params: Value,
    /// Anything a reader needs to interpret the number.
    pub note: String,
}

impl Figure {
    /// A figure with samples and nothing else yet.
    pub fn new(id: &str, name: &str, unit: &str, better: Better, samples: Vec<f64>) -> Self {
        Self {
            id: id.to_owned(),
            name: name.to_owned(),
            unit: unit.to_owned(),
            better,
            samples,
            baseline_samples: Vec::new(),
            baseline_name: String::new(),
            target: None,
            ratio_override: None,
            params: Value::Null,
            note: String::new(),
        }
    }

    /// Adds the baseline's samples.
    pub fn baseline(mut self, name: &str, samples: Vec<f64>) -> Self {
        self.baseline_name = name.to_owned();
        self.baseline_samples = samples;
        self
    }

    /// Adds a target and whether it is met.
    pub fn target(mut self, text: &str, met: bool) -> Self {
        self.target = Some((text.to_owned(), met));
        self
    }

    /// Replaces the ratio (value / baseline) with another, explained in `meaning`.
    pub fn ratio(mut self, ratio: f64, meaning: &str) -> Self {
        self.ratio_override = Some((ratio, meaning.to_owned()));
        self
    }

    /// Adds parameters.
    pub fn params(mut self, params: Value) -> Self {
        self.params = params;
        self
    }

    /// Adds a note.
    pub fn note(mut self, note: &str) -> Self {
        self.note = note.to_owned();
        self
    }

    /// The median of the samples.
    pub fn value(&self) -> f64 {
        median(&self.samples)
    }

    /// The median of the baseline's samples, if any.
    pub fn baseline_value(&self) -> Option<f64> {
        (!self.baseline_samples.is_empty()).then(|| median(&self.baseline_samples))
    }

    /// The ratio and what it means.
    pub fn ratio_value(&self) -> Option<(f64, String)> {
        if let Some(r) = &self.ratio_override {
            return Some(r.clone());
        }
        let b = self.baseline_value()?;
        let meaning = match self.better {
            Better::Higher => "pump / baseline (fraction of the baseline's rate)",
            Better::Lower => "pump / baseline (times the baseline's cost)",
        };
        Some((self.value() / b, meaning.to_owned()))
    }

    fn to_json(&self, bench: &str) -> Value {
        let (ratio, ratio_meaning) = self.ratio_value().unzip();
        json!({
            "id": self.id,
            "name": self.name,
            "value": round(self.value()),
            "unit": self.unit,
            "baseline": self.baseline_value().map(round),
            "baseline_name": (!self.baseline_name.is_empty()).then_some(&self.baseline_name),
            "ratio": ratio.map(round),
            "ratio_meaning": ratio_meaning,
            "higher_is_better": self.better == Better::Higher,
            "target": self.target.as_ref().map(|t| &t.0),
            "target_met": self.target.as_ref().map(|t| t.1),
            "samples": self.samples.iter().copied().map(round).collect::<Vec<_>>(),
            "baseline_samples": self.baseline_samples.iter().copied().map(round).collect::<Vec<_>>(),
            "runs": self.samples.len(),
            "params": self.params,
            "note": (!self.note.is_empty()).then_some(&self.note),
            "bench": bench,
        })
    }
}

fn round(x: f64) -> f64 {
    if !x.is_finite() {
        return x;
    }
    let digits = 4 - x.abs().max(1e-12).log10().floor() as i32;
    let scale = 10f64.powi(digits.clamp(0, 12));
    (x * scale).round() / scale
}

/// Figures measured by one bench binary.
#[derive(Debug)]
pub struct Report {
    bench: String,
    config: Config,
    figures: Vec<Figure>,
}

impl Report {
    /// A report for bench binary `bench`.
    pub fn new(bench: &str, config: &Config) -> Self {
        println!(
            "agentpump bench `{bench}`: {} ({} run{} per figure, median reported){}",
            if config.full {
                "full size"
            } else {
                "smoke test only (run with `cargo bench` to measure)"
            },
            config.runs,
            if config.runs == 1 { "" } else { "s" },
            machine_line()
        );
        Self {
            bench: bench.to_owned(),
            config: config.clone(),
            figures: Vec::new(),
        }
    }

    /// Adds a figure and prints it at once (long benches show progress).
    pub fn add(&mut self, figure: Figure) {
        println!(
            "  measured {:<5} {:<58} {}",
            figure.id,
            figure.name,
            fmt_value(figure.value(), &figure.unit)
        );
        self.figures.push(figure);
    }

    /// Prints the table and, under `cargo bench`, merges the figures into the JSON file.
    pub fn finish(self) {
        print_table(&self.figures);
        if !self.config.full {
            return;
        }
        let path = json_path();
        match merge(&path, &self.bench, &self.figures) {
            Ok(()) => println!("wrote {}", path.display()),
            Err(e) => eprintln!("could not write {}: {e}", path.display()),
        }
    }
}

fn print_table(figures: &[Figure]) {
    println!();
    println!(
        "| {:<5} | {:<60} | {:>20} | {:>20} | {:>8} | {:<44} |",
        "fig", "measure", "pump", "baseline", "ratio", "target"
    );
    println!(
        "|{}|{}|{}|{}|{}|{}|",
        "-".repeat(7),
        "-".repeat(62),
        "-".repeat(22),
        "-".repeat(22),
        "-".repeat(10),
        "-".repeat(46)
    );
    for f in figures {
        let baseline = f
            .baseline_value()
            .map_or_else(|| "—".to_owned(), |b| fmt_value(b, &f.unit));
        let ratio = f
            .ratio_value()
            .map_or_else(|| "—".to_owned(), |(r, _)| format!("{r:.3}"));
        let target = f.target.as_ref().map_or_else(
            || "—".to_owned(),
            |(t, met)| format!("{} {t}", if *met { "met" } else { "MISSED" }),
        );
        println!(
            "| {:<5} | {:<60} | {:>20} | {:>20} | {:>8} | {:<44} |",
            f.id,
            f.name,
            fmt_value(f.value(), &f.unit),
            baseline,
            ratio,
            target
        );
    }
    println!();
}

/// A value with its unit, to a sensible precision.
pub fn fmt_value(v: f64, unit: &str) -> String {
    let number = if v.abs() >= 100_000.0 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.4}")
    };
    format!("{number} {unit}")
}

/// `target/agentpump-bench.json` (or under `CARGO_TARGET_DIR`).
pub fn json_path() -> PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target"),
        PathBuf::from,
    );
    dir.join("agentpump-bench.json")
}

fn merge(path: &std::path::Path, bench: &str, figures: &[Figure]) -> std::io::Result<()> {
    let mut all: Vec<Value> = std::fs::read_to_string(path)
        .ok()
        .and_then(|text| serde_json::from_str::<Vec<Value>>(&text).ok())
        .unwrap_or_default();
    let measured_at = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let machine = machine();
    for f in figures {
        all.retain(|o| o.get("id").and_then(Value::as_str) != Some(&f.id));
        let mut object = f.to_json(bench);
        object["measured_at_unix"] = json!(measured_at);
        object["machine"] = machine.clone();
        all.push(object);
    }
    all.sort_by_key(sort_key);
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let text = serde_json::to_string_pretty(&all).map_err(std::io::Error::other)?;
    std::fs::write(path, text + "\n")
}

/// Figure number first, then the row id.
fn sort_key(v: &Value) -> (u32, String) {
    let id = v.get("id").and_then(Value::as_str).unwrap_or("");
    let number = id
        .chars()
        .take_while(char::is_ascii_digit)
        .collect::<String>()
        .parse()
        .unwrap_or(u32::MAX);
    (number, id.to_owned())
}

fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|m| m.trim().to_owned());
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    json!({
        "cores": std::thread::available_parallelism().map_or(0, std::num::NonZero::get),
        "cpu": model,
        "os": std::env::consts::OS,
        "loadavg_at_write": load.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
    })
}

fn machine_line() -> String {
    let m = machine();
    format!(
        "\n  machine: {} cores, {}; load average {}",
        m["cores"],
        m["cpu"].as_str().unwrap_or("unknown cpu"),
        m["loadavg_at_write"].as_str().unwrap_or("?")
    )
}

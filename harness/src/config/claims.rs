//! The `[[claim]]` tables of a plan file: the published result a scenario
//! reproduces, machine-readable, so an experiment's summary can say whether
//! its run agrees. A claim names a report row, the option that the source
//! found better (an arm, `better = "grpc"`, or with `across = "proxy"` a
//! value of that axis, `better = "none"`), what it is better than, where
//! (`items = ">=100"`: a test on an axis's value per key), the ratio the
//! source saw (`ratio = [1.5, 10]`: the worse side's value over the better
//! side's, inverted for a row where higher is better) and the source.
//! Rows and arms are checked against the run's own tables by `app::plan`;
//! here, only what the plan file itself says.

use toml::Spanned;
use toml::de::DeValue;

/// What is wrong with a claim: its line, key and problem (`experiment.rs`
/// makes each a `PlanError`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanError {
    pub line: usize,
    pub key: String,
    pub problem: String,
}

impl PlanError {
    fn at(line: usize, key: &str, problem: impl Into<String>) -> PlanError {
        PlanError { line, key: key.to_owned(), problem: problem.into() }
    }
}

/// An axis as a claim sees it: its flag, and its values (`None` for a
/// crossover search, whose values are found as it goes).
pub type AxisValues = (String, Option<Vec<String>>);

/// Line (from 1) of byte offset `at` in `text`.
pub fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())].iter().filter(|b| **b == b'\n').count() + 1
}

/// The most claims one plan states.
pub const MAX_CLAIMS: usize = 16;
/// The longest `says` or `source` text kept, in bytes.
pub const MAX_CLAIM_TEXT: usize = 1000;

/// A test on an axis's value: the cells a claim is about.
#[derive(Debug, Clone, PartialEq)]
pub enum Test {
    /// The value as the plan writes it (`compression = "gzip"`, `items = 100`).
    Equal(String),
    AtLeast(f64),
    AtMost(f64),
    Above(f64),
    Below(f64),
}

impl Test {
    /// Reads `">=100"`, `"<10"`, `100` or `"gzip"`.
    fn parse(text: &str) -> Result<Test, String> {
        let t = text.trim();
        type Make = fn(f64) -> Test;
        let ops: [(&str, Make); 4] =
            [(">=", Test::AtLeast), ("<=", Test::AtMost), (">", Test::Above), ("<", Test::Below)];
        for (op, make) in ops {
            if let Some(rest) = t.strip_prefix(op) {
                return match rest.trim().parse::<f64>() {
                    Ok(v) if v.is_finite() => Ok(make(v)),
                    _ => Err(format!("{text:?}: a number after {op} (\">=100\")")),
                };
            }
        }
        Ok(Test::Equal(t.to_owned()))
    }

    /// True when a cell's `value` passes.
    pub fn holds(&self, value: &str) -> bool {
        let n = value.trim().parse::<f64>().ok();
        match (self, n) {
            (Test::Equal(v), _) => v == value || v.parse::<f64>().ok().zip(n).is_some_and(|(a, b)| a == b),
            (Test::AtLeast(x), Some(n)) => n >= *x,
            (Test::AtMost(x), Some(n)) => n <= *x,
            (Test::Above(x), Some(n)) => n > *x,
            (Test::Below(x), Some(n)) => n < *x,
            _ => false,
        }
    }

    /// `items ≥ 100`, `compression gzip`.
    pub fn text(&self, flag: &str) -> String {
        match self {
            Test::Equal(v) => format!("{flag} {v}"),
            Test::AtLeast(x) => format!("{flag} ≥ {x}"),
            Test::AtMost(x) => format!("{flag} ≤ {x}"),
            Test::Above(x) => format!("{flag} > {x}"),
            Test::Below(x) => format!("{flag} < {x}"),
        }
    }
}

/// One `where` key of a claim: an axis and the test on its value.
#[derive(Debug, Clone, PartialEq)]
pub struct Where {
    pub flag: String,
    pub test: Test,
    pub line: usize,
}

/// One `[[claim]]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Claim {
    pub line: usize,
    /// The line of each of its keys (`row`, `better`, …).
    pub lines: Vec<(String, usize)>,
    /// The claim in words, as the source makes it.
    pub says: String,
    pub source: String,
    /// The report row (`cpu_us_per_request.downstream`).
    pub row: String,
    /// The option the source found better, and what it beat (`None`: the
    /// other arm of a two-arm plan).
    pub better: String,
    pub than: Option<String>,
    /// The axis whose values `better` and `than` are; `None` when they are arms.
    pub across: Option<String>,
    pub wheres: Vec<Where>,
    /// The ratio the source saw, worse side over better side, lower first.
    pub ratio: Option<(f64, f64)>,
}

impl Claim {
    /// The cells a claim is about: those whose every `where` holds.
    pub fn covers(&self, values: &[(String, String)]) -> bool {
        self.wheres.iter().all(|w| values.iter().any(|(f, v)| *f == w.flag && w.test.holds(v)))
    }

    /// The line of its key `key`, else of the claim.
    pub fn line_of(&self, key: &str) -> usize {
        self.lines.iter().find(|(k, _)| k == key).map_or(self.line, |(_, l)| *l)
    }

    /// `at items ≥ 100` (empty for every cell).
    pub fn where_text(&self) -> String {
        let parts: Vec<String> = self.wheres.iter().map(|w| w.test.text(&w.flag)).collect();
        if parts.is_empty() { String::new() } else { format!(" at {}", parts.join(", ")) }
    }
}

/// The keys of a claim besides its `where` keys.
const KEYS: &[&str] = &["says", "source", "row", "better", "than", "across", "ratio"];

/// Every `[[claim]]` of the file's `claim` array.
pub fn read(text: &str, value: &Spanned<DeValue<'_>>, errors: &mut Vec<PlanError>) -> Vec<Claim> {
    let line = line_of(text, value.span().start);
    let DeValue::Array(tables) = value.get_ref() else {
        errors.push(PlanError::at(line, "claim", "write each claim as a [[claim]] table"));
        return Vec::new();
    };
    if tables.len() > MAX_CLAIMS {
        errors.push(PlanError::at(line, "claim", format!("at most {MAX_CLAIMS} claims")));
    }
    tables.iter().take(MAX_CLAIMS).filter_map(|t| one(text, t, errors)).collect()
}

fn one(text: &str, t: &Spanned<DeValue<'_>>, errors: &mut Vec<PlanError>) -> Option<Claim> {
    let line = line_of(text, t.span().start);
    let Some(table) = t.get_ref().as_table() else {
        errors.push(PlanError::at(line, "claim", "write each claim as a [[claim]] table"));
        return None;
    };
    let before = errors.len();
    let mut string = |key: &str, needed: bool| match table.get(key).map(|v| (v.get_ref(), v.span().start)) {
        Some((DeValue::String(s), _)) if s.len() <= MAX_CLAIM_TEXT && !s.trim().is_empty() => Some(s.to_string()),
        Some((_, at)) => {
            let problem = format!("a text of 1 to {MAX_CLAIM_TEXT} bytes");
            errors.push(PlanError::at(line_of(text, at), key, problem));
            None
        }
        None if needed => {
            errors.push(PlanError::at(line, key, format!("a claim gives its {key} = \"...\"")));
            None
        }
        None => None,
    };
    let (says, source, row, better) =
        (string("says", true), string("source", true), string("row", true), string("better", true));
    let (than, across) = (string("than", false), string("across", false));
    let ratio = table.get("ratio").and_then(|v| ratio(text, v, errors));
    let mut wheres = Vec::new();
    for (k, v) in table.iter().filter(|(k, _)| !KEYS.contains(&k.get_ref().as_ref())) {
        let at = line_of(text, k.span().start);
        let value = match v.get_ref() {
            DeValue::String(s) => s.to_string(),
            DeValue::Integer(i) => i.as_str().replace('_', ""),
            DeValue::Float(f) => f.as_str().replace('_', ""),
            _ => {
                errors.push(PlanError::at(at, k.get_ref(), "a where is a value or a test: items = \">=100\""));
                continue;
            }
        };
        match Test::parse(&value) {
            Ok(test) => wheres.push(Where { flag: k.get_ref().to_string(), test, line: at }),
            Err(p) => errors.push(PlanError::at(at, k.get_ref(), p)),
        }
    }
    if errors.len() > before {
        return None;
    }
    let lines = table.iter().map(|(k, _)| (k.get_ref().to_string(), line_of(text, k.span().start))).collect();
    Some(Claim { line, lines, says: says?, source: source?, row: row?, better: better?, than, across, wheres, ratio })
}

fn ratio(text: &str, v: &Spanned<DeValue<'_>>, errors: &mut Vec<PlanError>) -> Option<(f64, f64)> {
    let number = |v: &DeValue<'_>| match v {
        DeValue::Integer(i) => i.as_str().replace('_', "").parse::<f64>().ok(),
        DeValue::Float(f) => f.as_str().replace('_', "").parse::<f64>().ok(),
        _ => None,
    };
    let r: Option<Vec<f64>> = match v.get_ref() {
        DeValue::Array(a) => a.iter().map(|x| number(x.get_ref())).collect(),
        _ => None,
    };
    match r.as_deref() {
        Some(&[lo, hi]) if lo > 0.0 && lo <= hi && hi.is_finite() => Some((lo, hi)),
        _ => {
            let problem = "two ratios above zero, lower first: ratio = [1.5, 10] (worse over better)";
            errors.push(PlanError::at(line_of(text, v.span().start), "ratio", problem));
            None
        }
    }
}

/// What the plan's own axes refuse of its claims: a where or an `across`
/// that names no axis, a `better` or `than` that is no value of `across`.
pub fn settle(claims: &[Claim], axes: &[AxisValues]) -> Vec<PlanError> {
    let mut errors = Vec::new();
    let axis = |flag: &str| axes.iter().find(|a| a.0 == flag);
    let names: Vec<&str> = axes.iter().map(|a| a.0.as_str()).collect();
    let listed = if names.is_empty() { "the plan has none".to_owned() } else { names.join(", ") };
    for c in claims {
        for w in &c.wheres {
            if axis(&w.flag).is_none() {
                let problem = format!("a claim's where names an axis ({listed}), or is one of {}", KEYS.join(", "));
                errors.push(PlanError::at(w.line, &w.flag, problem));
            }
        }
        let Some(across) = &c.across else { continue };
        match axis(across) {
            Some((_, Some(values))) => {
                for (key, v) in [("better", Some(&c.better)), ("than", c.than.as_ref())] {
                    match v {
                        Some(v) if !values.contains(v) => {
                            let problem = format!("{v:?} is not a value of the {across} axis ({})", values.join(", "));
                            errors.push(PlanError::at(c.line_of(key), key, problem));
                        }
                        None => errors.push(PlanError::at(
                            c.line_of("across"),
                            key,
                            "a claim across an axis names both values",
                        )),
                        _ => {}
                    }
                }
            }
            _ => errors.push(PlanError::at(c.line_of("across"), "across", format!("names no listed axis ({listed})"))),
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_where_tests_a_cells_value() {
        assert!(Test::parse(">=100").unwrap().holds("100") && !Test::parse(">=100").unwrap().holds("30"));
        assert!(Test::parse("<10").unwrap().holds("1") && !Test::parse("<10").unwrap().holds("gzip"));
        assert!(Test::parse("100").unwrap().holds("100.0") && Test::parse("gzip").unwrap().holds("gzip"));
        assert!(Test::parse(">= x").is_err());
    }
}

//! A plan file (`harness plan FILE`): a base configuration in the flags' own
//! words (keys are long flag names: `qps = 100`, `transport = "grpc,rest"`)
//! and `[[axis]]` tables, crossed by default or zipped (`zip = true`), or
//! one searched for where a verdict flips (`find = "crossover"`). This file
//! reads the TOML text into a [`PlanFile`] whose every setting keeps its
//! line (`matrix.rs` turns it into the cells' argument lists). It never parses a
//! flag's value: the flags' own parser and rules do (`app::plan`).

use std::fmt;

use toml::Spanned;
use toml::de::{DeTable, DeValue};

use super::claims::line_of;

/// The largest plan file read, in bytes.
pub const MAX_PLAN_BYTES: usize = 64 << 10;
/// The most cells one experiment runs.
pub const MAX_CELLS: usize = 256;
/// The most axes one plan has.
pub const MAX_AXES: usize = 8;
/// The most probes a crossover search runs (its two bounds included).
pub const MAX_PROBES: usize = 24;
/// The keys the plan decides itself, never the file.
const RESERVED: &[&str] = &["out", "help", "version"];

/// What is wrong with a plan, and where: its line and key when it has one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanError {
    pub line: Option<usize>,
    pub key: Option<String>,
    pub problem: String,
}

impl PlanError {
    pub fn at(line: usize, key: &str, problem: impl Into<String>) -> PlanError {
        PlanError { line: Some(line), key: Some(key.to_owned()), problem: problem.into() }
    }

    /// `file:line: key: problem`, the parts it has.
    pub fn display<'a>(&'a self, file: &'a str) -> impl fmt::Display + 'a {
        struct Shown<'a>(&'a PlanError, &'a str);
        impl fmt::Display for Shown<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                let PlanError { line, key, problem } = self.0;
                write!(f, "{}", self.1)?;
                if let Some(line) = line {
                    write!(f, ":{line}")?;
                }
                if let Some(key) = key {
                    write!(f, ": {key}")?;
                }
                write!(f, ": {problem}")
            }
        }
        Shown(self, file)
    }
}

impl From<super::claims::PlanError> for PlanError {
    fn from(e: super::claims::PlanError) -> PlanError {
        PlanError::at(e.line, &e.key, e.problem)
    }
}

/// One flag's value as the plan gives it.
#[derive(Debug, Clone, PartialEq)]
pub enum FlagValue {
    /// The value's text, as it goes on the command line.
    Text(String),
    /// `true` / `false`: a switch given or not, or a value for a flag that takes one.
    Bool(bool),
}

impl FlagValue {
    /// The value as a word in a cell's name and a summary's table.
    pub fn text(&self) -> String {
        match self {
            FlagValue::Text(t) => t.clone(),
            FlagValue::Bool(b) => b.to_string(),
        }
    }
}

/// A key of the base: a flag and its value, on `line`.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting {
    pub flag: String,
    pub value: FlagValue,
    pub line: usize,
}

/// A crossover search on a numeric axis (`find = "crossover"`).
#[derive(Debug, Clone, PartialEq)]
pub struct Find {
    /// The report row judged at every probe (`cpu_us_per_request.downstream`).
    pub row: String,
    pub row_line: usize,
    /// The bounds of the axis searched, lower first.
    pub low: f64,
    pub high: f64,
    /// Stop when neighbouring probes are within this ratio (0.25: 25%).
    pub resolution: f64,
}

/// One `[[axis]]`: a flag and its values (each with its line), zipped or crossed.
#[derive(Debug, Clone, PartialEq)]
pub struct Axis {
    pub flag: String,
    pub line: usize,
    pub values: Vec<(FlagValue, usize)>,
    pub zip: bool,
    pub find: Option<Find>,
}

/// A plan file read: its base settings in file order and its axes.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanFile {
    pub base: Vec<Setting>,
    pub axes: Vec<Axis>,
    /// The published results the plan reproduces (`[[claim]]`, `claims.rs`).
    pub claims: Vec<super::claims::Claim>,
}

/// What a flag is, for a key named after it: `None` for no such flag,
/// `Some(true)` for one that takes a value, `Some(false)` for a switch.
pub type FlagKind<'a> = &'a dyn Fn(&str) -> Option<bool>;

/// Reads a plan file's text, each key checked to name a flag (`kind`);
/// every problem found, not just the first.
pub fn parse(text: &str, kind: FlagKind<'_>) -> Result<PlanFile, Vec<PlanError>> {
    match parse_all(text, kind) {
        (Some(plan), errors) if errors.is_empty() => Ok(plan),
        (_, errors) => Err(errors),
    }
}

/// [`parse`], giving back what could be read beside the errors: a key
/// that names no flag, or a second axis on one, left out; `None` for a
/// file that is not TOML or too large.
pub fn parse_all(text: &str, kind: FlagKind<'_>) -> (Option<PlanFile>, Vec<PlanError>) {
    match read(text, kind) {
        Ok((plan, errors)) => (Some(plan), errors),
        Err(errors) => (None, errors),
    }
}

fn read(text: &str, kind: FlagKind<'_>) -> Result<(PlanFile, Vec<PlanError>), Vec<PlanError>> {
    if text.len() > MAX_PLAN_BYTES {
        let problem = format!("the plan is {} bytes; a plan file may be at most {MAX_PLAN_BYTES}", text.len());
        return Err(vec![PlanError { line: None, key: None, problem }]);
    }
    let root = DeTable::parse(text).map_err(|e| {
        let line = e.span().map(|s| line_of(text, s.start));
        vec![PlanError { line, key: None, problem: format!("not TOML: {}", e.message().trim()) }]
    })?;
    let (mut base, mut axes, mut errors, mut claims) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut entries: Vec<_> = root.get_ref().iter().collect();
    entries.sort_by_key(|(k, _)| k.span().start);
    for (key, value) in entries {
        let (name, line) = (key.get_ref().as_ref(), line_of(text, key.span().start));
        if name == "claim" {
            let mut problems = Vec::new();
            claims = super::claims::read(text, value, &mut problems);
            errors.extend(problems.into_iter().map(PlanError::from));
        } else if name == "axis" {
            match value.get_ref() {
                DeValue::Array(tables) => {
                    for t in tables.iter() {
                        match axis(text, t) {
                            Ok(a) => axes.push(a),
                            Err(e) => errors.extend(e),
                        }
                    }
                }
                _ => errors.push(PlanError::at(line, name, "write each axis as an [[axis]] table")),
            }
        } else if RESERVED.contains(&name) {
            errors.push(PlanError::at(line, name, "the plan decides this itself (harness plan --out DIR)"));
        } else {
            match flag_value(value.get_ref()) {
                Ok(v) => base.push(Setting { flag: name.to_owned(), value: v, line }),
                Err(p) => errors.push(PlanError::at(line, name, p)),
            }
        }
    }
    if axes.len() > MAX_AXES {
        errors.push(PlanError { line: None, key: None, problem: format!("at most {MAX_AXES} axes") });
    }
    let mut plan = PlanFile { base, axes, claims };
    errors.extend(plan.settle(kind));
    Ok((plan, errors))
}

/// Every key names a flag, once: the base's and the axes' keys are flags
/// `kind` knows, no two axes and no axis and base key share one; `true` /
/// `false` for a flag that takes a value becomes its text.
impl PlanFile {
    fn settle(&mut self, kind: FlagKind<'_>) -> Vec<PlanError> {
        let mut errors = Vec::new();
        let mut known = |flag: &str, line: usize, value: &mut FlagValue| match (kind(flag), &*value) {
            (None, _) => errors.push(PlanError::at(
                line,
                flag,
                "not a flag of a run (keys are long flag names: qps, items, transport, ...)",
            )),
            (Some(true), FlagValue::Bool(b)) => *value = FlagValue::Text(b.to_string()),
            (Some(false), FlagValue::Text(t)) => {
                errors.push(PlanError::at(
                    line,
                    flag,
                    format!("--{flag} is a switch: write {flag} = true or false, not {t:?}"),
                ));
            }
            _ => {}
        };
        for s in &mut self.base {
            known(&s.flag, s.line, &mut s.value);
        }
        for a in &mut self.axes {
            if a.find.is_some() && kind(&a.flag).is_none() {
                known(&a.flag, a.line, &mut FlagValue::Bool(false));
            }
            for (v, line) in &mut a.values {
                known(&a.flag, *line, v);
            }
        }
        for (i, a) in self.axes.iter().enumerate() {
            if let Some(b) = self.axes[..i].iter().find(|b| b.flag == a.flag) {
                errors.push(PlanError::at(
                    a.line,
                    &a.flag,
                    format!("two axes on one flag (the other on line {})", b.line),
                ));
            }
            if let Some(s) = self.base.iter().find(|s| s.flag == a.flag) {
                errors.push(PlanError::at(
                    a.line,
                    &a.flag,
                    format!("an axis on a flag the base sets too (line {})", s.line),
                ));
            }
        }
        self.base.retain(|s| kind(&s.flag).is_some());
        let mut seen = Vec::new();
        self.axes.retain(|a| {
            let first =
                !seen.contains(&a.flag) && !self.base.iter().any(|s| s.flag == a.flag) && kind(&a.flag).is_some();
            seen.push(a.flag.clone());
            first
        });
        let axes: Vec<super::claims::AxisValues> = self
            .axes
            .iter()
            .map(|a| (a.flag.clone(), a.find.is_none().then(|| a.values.iter().map(|(v, _)| v.text()).collect())))
            .collect();
        errors.extend(super::claims::settle(&self.claims, &axes).into_iter().map(PlanError::from));
        if self.axes.iter().filter(|a| a.find.is_some()).count() > 0 && self.axes.len() > 1 {
            let problem = "a crossover search is the plan's one axis: run other axes as plans of their own";
            errors.push(PlanError { line: None, key: None, problem: problem.into() });
        }
        errors
    }
}

/// A scalar (or a list of scalars, joined by commas) as a flag's value.
fn flag_value(v: &DeValue<'_>) -> Result<FlagValue, String> {
    let text = match v {
        DeValue::Boolean(b) => return Ok(FlagValue::Bool(*b)),
        DeValue::String(s) => s.to_string(),
        DeValue::Integer(i) => match i.radix() {
            10 => i.as_str().replace('_', ""),
            r => i64::from_str_radix(&i.as_str().replace('_', ""), r).map_err(|e| e.to_string())?.to_string(),
        },
        DeValue::Float(f) => f.as_str().replace('_', ""),
        DeValue::Array(items) => {
            let parts: Result<Vec<String>, String> = items
                .iter()
                .map(|i| match flag_value(i.get_ref())? {
                    FlagValue::Text(t) => Ok(t),
                    FlagValue::Bool(b) => Ok(b.to_string()),
                })
                .collect();
            parts?.join(",")
        }
        DeValue::Datetime(_) | DeValue::Table(_) => {
            return Err("a flag's value is a string, a number, true/false or a list of them".into());
        }
    };
    Ok(FlagValue::Text(text))
}

/// One `[[axis]]` table.
fn axis(text: &str, t: &Spanned<DeValue<'_>>) -> Result<Axis, Vec<PlanError>> {
    let line = line_of(text, t.span().start);
    let Some(table) = t.get_ref().as_table() else {
        return Err(vec![PlanError::at(line, "axis", "write each axis as an [[axis]] table")]);
    };
    let field = |name: &str| table.get(name).map(|v| (v.get_ref(), line_of(text, v.span().start)));
    let mut errors = Vec::new();
    for (k, _) in table.iter() {
        let known = ["flag", "values", "zip", "find", "range", "row", "resolution"];
        if !known.contains(&k.get_ref().as_ref()) {
            errors.push(PlanError::at(
                line_of(text, k.span().start),
                k.get_ref(),
                format!("not a key of an axis (these are: {})", known.join(", ")),
            ));
        }
    }
    let (flag, line) = match field("flag") {
        Some((DeValue::String(s), l)) => (s.to_string(), l),
        _ => {
            errors.push(PlanError::at(line, "axis", "an axis names its flag: flag = \"items\""));
            return Err(errors);
        }
    };
    let zip = match field("zip") {
        None => false,
        Some((DeValue::Boolean(b), _)) => *b,
        Some((_, l)) => {
            errors.push(PlanError::at(l, "zip", "true or false"));
            false
        }
    };
    let find = match field("find") {
        None => None,
        Some((DeValue::String(s), _)) if s == "crossover" => find(&field, line, &mut errors),
        Some((_, l)) => {
            errors.push(PlanError::at(l, "find", "the one search is find = \"crossover\""));
            None
        }
    };
    let mut values = Vec::new();
    match (field("values"), &find) {
        (Some((DeValue::Array(items), _)), None) if !items.is_empty() => {
            for v in items.iter() {
                match flag_value(v.get_ref()) {
                    Ok(x) => values.push((x, line_of(text, v.span().start))),
                    Err(p) => errors.push(PlanError::at(line_of(text, v.span().start), &flag, p)),
                }
            }
        }
        (None, Some(_)) => {}
        (Some((_, l)), Some(_)) => errors.push(PlanError::at(l, "values", "a crossover axis has a range, no values")),
        (Some((_, l)), None) => errors.push(PlanError::at(l, "values", "a non-empty list: values = [1, 10, 100]")),
        (None, None) => errors.push(PlanError::at(line, &flag, "an axis has values = [...] (or find = \"crossover\")")),
    }
    if errors.is_empty() { Ok(Axis { flag, line, values, zip, find }) } else { Err(errors) }
}

type Field<'a, 'i> = dyn Fn(&str) -> Option<(&'a DeValue<'i>, usize)> + 'a;

/// The `range`, `row` and `resolution` of a crossover axis.
fn find(field: &Field<'_, '_>, line: usize, errors: &mut Vec<PlanError>) -> Option<Find> {
    let number = |v: &DeValue<'_>| match v {
        DeValue::Integer(i) => i.as_str().replace('_', "").parse::<f64>().ok(),
        DeValue::Float(f) => f.as_str().replace('_', "").parse::<f64>().ok(),
        _ => None,
    };
    let range = match field("range") {
        Some((DeValue::Array(a), l)) => match a.iter().map(|v| number(v.get_ref())).collect::<Option<Vec<f64>>>() {
            Some(r) if r.len() == 2 && r[0] > 0.0 && r[0] < r[1] && r[1].is_finite() => Some((r[0], r[1])),
            _ => {
                errors.push(PlanError::at(l, "range", "two numbers above zero, lower first: range = [1, 10000]"));
                None
            }
        },
        _ => {
            errors.push(PlanError::at(line, "range", "a crossover axis gives its bounds: range = [1, 10000]"));
            None
        }
    };
    let row = match field("row") {
        Some((DeValue::String(s), l)) => Some((s.to_string(), l)),
        _ => {
            let problem = "the row judged at each probe: row = \"cpu_us_per_request.downstream\"";
            errors.push(PlanError::at(line, "row", problem));
            None
        }
    };
    let resolution = match field("resolution").map(|(v, l)| (number(v), l)) {
        None => Some(0.25),
        Some((Some(r), _)) if r > 0.0 && r <= 10.0 => Some(r),
        Some((_, l)) => {
            errors.push(PlanError::at(l, "resolution", "a ratio above 0 and at most 10 (0.25: within 25%)"));
            None
        }
    };
    let ((low, high), (row, row_line), resolution) = (range?, row?, resolution?);
    Some(Find { row, row_line, low, high, resolution })
}

#[cfg(test)]
#[path = "experiment_tests.rs"]
mod tests;

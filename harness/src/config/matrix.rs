//! A plan file's matrix: its cells (the zipped axes walked together,
//! crossed with every other axis) and a crossover search's probes, each
//! with the argument list the flags would be.

use super::experiment::{Axis, Find, FlagValue, MAX_CELLS, PlanError, PlanFile};

/// One point of the matrix: its name, the axis values that make it, and
/// the argument list the flags would be (`--out` not included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub id: String,
    pub values: Vec<(String, String)>,
    pub args: Vec<String>,
}

impl PlanFile {
    /// The crossover axis, if the plan searches one.
    pub fn crossover(&self) -> Option<(&Axis, &Find)> {
        self.axes.iter().find_map(|a| Some((a, a.find.as_ref()?)))
    }

    /// The points of the matrix: the zipped axes walked together (all of
    /// one length), crossed with every other axis, the first axis slowest.
    /// A crossover axis contributes no cells here (its probes are chosen
    /// as the search goes, [`PlanFile::probe`]).
    pub fn cells(&self) -> Result<Vec<Cell>, Vec<PlanError>> {
        let listed: Vec<&Axis> = self.axes.iter().filter(|a| a.find.is_none()).collect();
        let zipped: Vec<&Axis> = listed.iter().copied().filter(|a| a.zip).collect();
        let mut errors = Vec::new();
        if let Some(first) = zipped.first() {
            for a in zipped.iter().skip(1).filter(|a| a.values.len() != first.values.len()) {
                let problem = format!(
                    "zipped axes have one length: {} here, {} for {}",
                    a.values.len(),
                    first.values.len(),
                    first.flag
                );
                errors.push(PlanError::at(a.line, &a.flag, problem));
            }
        }
        // Each dimension: a list of points, each point the (axis, value index) it sets.
        let mut dims: Vec<Vec<Vec<(usize, usize)>>> = Vec::new();
        for (i, a) in self.axes.iter().enumerate().filter(|(_, a)| a.find.is_none()) {
            if a.zip {
                if zipped.first().is_some_and(|f| std::ptr::eq(*f, a)) {
                    dims.push((0..a.values.len()).map(|k| self.zipped_at(k)).collect());
                }
            } else {
                dims.push((0..a.values.len()).map(|k| vec![(i, k)]).collect());
            }
        }
        let count = dims.iter().try_fold(1usize, |n, d| n.checked_mul(d.len())).unwrap_or(usize::MAX);
        if count > MAX_CELLS {
            let problem = format!("the axes make {count} cells; an experiment runs at most {MAX_CELLS}");
            errors.push(PlanError { line: None, key: None, problem });
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        let mut points: Vec<Vec<(usize, usize)>> = vec![Vec::new()];
        for dim in &dims {
            points = points.iter().flat_map(|p| dim.iter().map(move |d| [p.clone(), d.clone()].concat())).collect();
        }
        Ok(points
            .iter()
            .enumerate()
            .map(|(n, point)| {
                let set: Vec<(String, FlagValue)> =
                    point.iter().map(|&(a, k)| (self.axes[a].flag.clone(), self.axes[a].values[k].0.clone())).collect();
                self.cell(&format!("{:02}", n + 1), &set)
            })
            .collect())
    }

    /// The (axis, value index) pairs of every zipped axis at index `k`.
    fn zipped_at(&self, k: usize) -> Vec<(usize, usize)> {
        self.axes.iter().enumerate().filter(|(_, a)| a.zip && a.find.is_none()).map(|(i, _)| (i, k)).collect()
    }

    /// The cell of one crossover probe: the crossover axis at `value`, with
    /// the plan's other settings.
    pub fn probe(&self, n: usize, value: &str) -> Option<Cell> {
        let (axis, _) = self.crossover()?;
        Some(self.cell(&format!("p{n:02}"), &[(axis.flag.clone(), FlagValue::Text(value.to_owned()))]))
    }

    /// A cell setting `set` over the base: the base's flags in file order,
    /// then the axes' values.
    fn cell(&self, number: &str, set: &[(String, FlagValue)]) -> Cell {
        let mut args = Vec::new();
        let settings = self.base.iter().map(|s| (&s.flag, &s.value)).chain(set.iter().map(|(f, v)| (f, v)));
        for (flag, value) in settings {
            match value {
                FlagValue::Bool(false) => {}
                FlagValue::Bool(true) => args.push(format!("--{flag}")),
                FlagValue::Text(t) => args.extend([format!("--{flag}"), t.clone()]),
            }
        }
        let values: Vec<(String, String)> = set.iter().map(|(f, v)| (f.clone(), v.text())).collect();
        let mut id = number.to_owned();
        for (f, v) in &values {
            id.push('-');
            id.push_str(f);
            id.push('-');
            id.extend(v.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' { c } else { '_' }).take(24));
        }
        Cell { id, values, args }
    }
}

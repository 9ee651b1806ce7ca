//! Categorical search spaces: named parameters, each an index into `n_choices` options.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// One categorical parameter: choices are the indices `0..n_choices` (for the prompt optimizer,
/// index 0 is the baseline prompt of an agent and 1.. its variants).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Param {
    /// The parameter's name (an agent name for the prompt optimizer).
    pub name: String,
    /// How many choices it has (at least 1).
    pub n_choices: usize,
}

/// An ordered list of categorical parameters. A parameter assignment is a `&[usize]` in this
/// order; [`SearchSpace::assignment`] builds one from names.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchSpace {
    params: Vec<Param>,
}

impl SearchSpace {
    /// An empty space; add parameters with [`SearchSpace::with_param`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a parameter with `n_choices` choices.
    pub fn with_param(mut self, name: impl Into<String>, n_choices: usize) -> Result<Self> {
        let name = name.into();
        if n_choices == 0 {
            return Err(Error::NoChoices { name });
        }
        if self.index_of(&name).is_some() {
            return Err(Error::DuplicateParam { name });
        }
        self.params.push(Param { name, n_choices });
        Ok(self)
    }

    /// The parameters, in assignment order.
    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.params.len()
    }

    /// Whether the space has no parameters.
    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    /// Position of the parameter called `name`.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.params.iter().position(|p| p.name == name)
    }

    /// Number of points (product of the choice counts); `None` past `u128::MAX`.
    pub fn size(&self) -> Option<u128> {
        self.params
            .iter()
            .try_fold(1u128, |acc, p| acc.checked_mul(p.n_choices as u128))
    }

    /// Checks that `params` is an assignment of this space.
    pub fn validate(&self, params: &[usize]) -> Result<()> {
        if params.len() != self.params.len() {
            return Err(Error::ParamCount {
                expected: self.params.len(),
                got: params.len(),
            });
        }
        for (p, &index) in self.params.iter().zip(params) {
            if index >= p.n_choices {
                return Err(Error::ParamOutOfRange {
                    name: p.name.clone(),
                    index,
                    n_choices: p.n_choices,
                });
            }
        }
        Ok(())
    }

    /// Builds an assignment from `(name, index)` pairs; every parameter must be named once.
    pub fn assignment<'a>(
        &self,
        named: impl IntoIterator<Item = (&'a str, usize)>,
    ) -> Result<Vec<usize>> {
        let mut out = vec![None; self.params.len()];
        for (name, index) in named {
            let at = self.index_of(name).ok_or_else(|| Error::UnknownParam {
                name: name.to_owned(),
            })?;
            if out[at].replace(index).is_some() {
                return Err(Error::DuplicateParam {
                    name: name.to_owned(),
                });
            }
        }
        let params = out
            .into_iter()
            .zip(&self.params)
            .map(|(v, p)| {
                v.ok_or_else(|| Error::MissingParam {
                    name: p.name.clone(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        self.validate(&params)?;
        Ok(params)
    }

    /// Adds one choice to the parameter at `param`; returns the new choice's index.
    pub fn add_choice(&mut self, param: usize) -> Result<usize> {
        let count = self.params.len();
        let p = self.params.get_mut(param).ok_or(Error::ParamCount {
            expected: count,
            got: param + 1,
        })?;
        p.n_choices += 1;
        Ok(p.n_choices - 1)
    }

    /// `(name, index)` pairs of an assignment, for logs and prompt look-up.
    pub fn named<'a>(&'a self, params: &'a [usize]) -> impl Iterator<Item = (&'a str, usize)> {
        self.params
            .iter()
            .zip(params)
            .map(|(p, &i)| (p.name.as_str(), i))
    }

    /// The `index`-th point in mixed-radix order (first parameter varies slowest).
    pub(crate) fn decode(&self, mut index: u128) -> Vec<usize> {
        let mut out = vec![0; self.params.len()];
        for (slot, p) in out.iter_mut().zip(&self.params).rev() {
            let n = p.n_choices as u128;
            *slot = (index % n) as usize;
            index /= n;
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn space() -> SearchSpace {
        SearchSpace::new()
            .with_param("planner", 3)
            .unwrap()
            .with_param("finalizer", 2)
            .unwrap()
    }

    #[test]
    fn builds_and_validates() {
        let s = space();
        assert_eq!(s.size(), Some(6));
        assert!(s.validate(&[2, 1]).is_ok());
        assert!(matches!(
            s.validate(&[3, 0]),
            Err(Error::ParamOutOfRange { index: 3, .. })
        ));
        assert!(matches!(s.validate(&[0]), Err(Error::ParamCount { .. })));
        assert!(matches!(
            SearchSpace::new().with_param("x", 0),
            Err(Error::NoChoices { .. })
        ));
        assert!(matches!(
            s.clone().with_param("planner", 2),
            Err(Error::DuplicateParam { .. })
        ));
    }

    #[test]
    fn named_assignments() {
        let s = space();
        assert_eq!(
            s.assignment([("finalizer", 1), ("planner", 2)]).unwrap(),
            vec![2, 1]
        );
        assert!(matches!(
            s.assignment([("planner", 0)]),
            Err(Error::MissingParam { .. })
        ));
        assert!(matches!(
            s.assignment([("planner", 0), ("finalizer", 0), ("critic", 0)]),
            Err(Error::UnknownParam { .. })
        ));
        let named: Vec<_> = s.named(&[1, 0]).collect();
        assert_eq!(named, vec![("planner", 1), ("finalizer", 0)]);
    }

    #[test]
    fn decode_enumerates_every_point_once() {
        let s = space();
        let mut all: Vec<_> = (0..6).map(|i| s.decode(i)).collect();
        assert_eq!(all[0], vec![0, 0]);
        assert_eq!(all[1], vec![0, 1]);
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 6);
    }
}

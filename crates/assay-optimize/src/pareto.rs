//! Dominance, non-domination ranks, hypervolume and hypervolume subset selection.
//!
//! Every function here works on *losses* (smaller is better in every objective): a
//! row-major `&[f64]` of `n` points × `d` objectives. [`crate::Direction::loss`] turns values
//! into losses.

/// Row `i` of a row-major matrix with `d` columns.
pub(crate) fn row(data: &[f64], d: usize, i: usize) -> &[f64] {
    &data[i * d..(i + 1) * d]
}

/// Whether loss vector `a` dominates `b`: no worse anywhere, better somewhere.
pub(crate) fn dominates(a: &[f64], b: &[f64]) -> bool {
    let mut better = false;
    for (x, y) in a.iter().zip(b) {
        if x > y {
            return false;
        }
        better |= x < y;
    }
    better
}

/// Indices `0..n` sorted lexicographically by loss vector (ties by index), so that a point's
/// dominators always come before it.
fn lex_order(data: &[f64], d: usize) -> Vec<usize> {
    let n = data.len() / d.max(1);
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| {
        row(data, d, i)
            .iter()
            .zip(row(data, d, j))
            .map(|(a, b)| a.total_cmp(b))
            .find(|o| o.is_ne())
            .unwrap_or(std::cmp::Ordering::Equal)
            .then(i.cmp(&j))
    });
    order
}

/// Non-domination rank of every point (0 = not dominated by any point). Ranks are peeled until
/// at least `n_needed` points have one; the others get `usize::MAX` (Optuna's `n_below` cut).
/// Equal loss vectors share a rank.
///
/// Each front is peeled in lexicographic order against the members of that front found so
/// far: a dominated point always has a dominator on the current front that sorts before it,
/// so the cost is O(n · |front|) per front instead of O(n²).
pub(crate) fn nondomination_ranks(data: &[f64], d: usize, n_needed: usize) -> Vec<usize> {
    let n = data.len() / d.max(1);
    let mut ranks = vec![usize::MAX; n];
    let mut remaining = lex_order(data, d);
    let mut ranked = 0;
    let mut rank = 0;
    let mut front: Vec<usize> = Vec::new();
    let mut rest: Vec<usize> = Vec::new();
    while ranked < n_needed.min(n) && !remaining.is_empty() {
        front.clear();
        rest.clear();
        for &i in &remaining {
            let p = row(data, d, i);
            if front.iter().any(|&f| dominates(row(data, d, f), p)) {
                rest.push(i);
            } else {
                front.push(i);
            }
        }
        for &i in &front {
            ranks[i] = rank;
        }
        ranked += front.len();
        rank += 1;
        std::mem::swap(&mut remaining, &mut rest);
    }
    ranks
}

/// Optuna's reference point for a set of losses: the worst value per objective pushed out by
/// 10% (`max(1.1 w, 0.9 w)`), with 0 replaced by a tiny positive number.
pub(crate) fn reference_point(data: &[f64], d: usize) -> Vec<f64> {
    let n = data.len() / d.max(1);
    (0..d)
        .map(|k| {
            let worst = (0..n)
                .map(|i| data[i * d + k])
                .fold(f64::NEG_INFINITY, f64::max);
            let r = (1.1 * worst).max(0.9 * worst);
            if r == 0.0 { 1e-12 } else { r }
        })
        .collect()
}

/// Hypervolume dominated by `points` (rows of `d` losses) and bounded by `reference`.
/// Points not strictly better than the reference in every objective add nothing.
/// Exact: a sweep for d ≤ 2, slicing along the last objective above that (fine for the few
/// dozen points the sampler gives it).
pub(crate) fn hypervolume(points: &[&[f64]], reference: &[f64]) -> f64 {
    let d = reference.len();
    let inside: Vec<&[f64]> = points
        .iter()
        .copied()
        .filter(|p| p.iter().zip(reference).all(|(x, r)| x < r))
        .collect();
    if inside.is_empty() {
        return 0.0;
    }
    match d {
        0 => 0.0,
        1 => reference[0] - inside.iter().map(|p| p[0]).fold(f64::INFINITY, f64::min),
        2 => {
            let mut sorted = inside;
            sorted.sort_by(|a, b| a[0].total_cmp(&b[0]).then(a[1].total_cmp(&b[1])));
            let mut hv = 0.0;
            let mut y = reference[1];
            for p in sorted {
                if p[1] < y {
                    hv += (reference[0] - p[0]) * (y - p[1]);
                    y = p[1];
                }
            }
            hv
        }
        _ => {
            let mut sorted = inside;
            sorted.sort_by(|a, b| a[d - 1].total_cmp(&b[d - 1]));
            let mut hv = 0.0;
            for i in 0..sorted.len() {
                let top = sorted.get(i + 1).map_or(reference[d - 1], |p| p[d - 1]);
                let height = top - sorted[i][d - 1];
                if height > 0.0 {
                    let slice: Vec<&[f64]> = sorted[..=i].iter().map(|p| &p[..d - 1]).collect();
                    hv += height * hypervolume(&slice, &reference[..d - 1]);
                }
            }
            hv
        }
    }
}

/// Greedy hypervolume subset selection: picks `k` of the `candidates` (rows of `d` losses),
/// each time the one that adds the most hypervolume to those already picked (ties to the
/// earliest). Returns positions into `candidates`. Greedy HSSP is within 1 - 1/e of the best
/// subset (hypervolume is submodular); Optuna's MOTPE tie-break uses the same greedy rule.
/// As in Optuna, equal loss vectors are selected among only once; when there are fewer
/// distinct vectors than `k`, all distinct ones are taken and then the first repeats.
pub(crate) fn hssp_greedy(candidates: &[f64], d: usize, k: usize, reference: &[f64]) -> Vec<usize> {
    let n = candidates.len() / d.max(1);
    if k >= n {
        return (0..n).collect();
    }
    let order = lex_order(candidates, d);
    let mut unique: Vec<usize> = Vec::with_capacity(n);
    let mut repeats: Vec<usize> = Vec::new();
    for (pos, &i) in order.iter().enumerate() {
        if pos > 0 && row(candidates, d, order[pos - 1]) == row(candidates, d, i) {
            repeats.push(i);
        } else {
            unique.push(i);
        }
    }
    if unique.len() <= k {
        repeats.sort_unstable();
        unique.extend(repeats.into_iter().take(k - unique.len()));
        return unique;
    }
    unique.sort_unstable();
    let mut chosen: Vec<usize> = Vec::with_capacity(k);
    let mut taken = vec![false; n];
    let mut base = 0.0;
    let mut set: Vec<&[f64]> = Vec::with_capacity(k + 1);
    while chosen.len() < k {
        let mut best: Option<(usize, f64)> = None;
        for &i in unique.iter().filter(|&&i| !taken[i]) {
            set.clear();
            set.extend(chosen.iter().map(|&c| row(candidates, d, c)));
            set.push(row(candidates, d, i));
            let gain = hypervolume(&set, reference) - base;
            if best.is_none_or(|(_, g)| gain > g) {
                best = Some((i, gain));
            }
        }
        let Some((i, gain)) = best else { break };
        taken[i] = true;
        chosen.push(i);
        base += gain;
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dominance() {
        assert!(dominates(&[1.0, 1.0], &[1.0, 2.0]));
        assert!(!dominates(&[1.0, 2.0], &[1.0, 2.0]));
        assert!(!dominates(&[0.0, 3.0], &[1.0, 2.0]));
    }

    fn brute_ranks(data: &[f64], d: usize) -> Vec<usize> {
        let n = data.len() / d;
        let mut ranks = vec![usize::MAX; n];
        let mut rank = 0;
        while ranks.contains(&usize::MAX) {
            let current: Vec<usize> = (0..n)
                .filter(|&i| ranks[i] == usize::MAX)
                .filter(|&i| {
                    !(0..n).any(|j| {
                        ranks[j] == usize::MAX && dominates(row(data, d, j), row(data, d, i))
                    })
                })
                .collect();
            for i in current {
                ranks[i] = rank;
            }
            rank += 1;
        }
        ranks
    }

    #[test]
    fn ranks_match_brute_force() {
        let mut rng = crate::rng::SplitMix64::for_trial(3, 0);
        for d in 1..=3 {
            for _ in 0..30 {
                let n = 1 + rng.below(40);
                let data: Vec<f64> = (0..n * d).map(|_| rng.below(6) as f64).collect();
                assert_eq!(nondomination_ranks(&data, d, n), brute_ranks(&data, d));
                // Early stop: the first ranks are the same.
                let partial = nondomination_ranks(&data, d, 1);
                let full = brute_ranks(&data, d);
                for i in 0..n {
                    if full[i] == 0 {
                        assert_eq!(partial[i], 0);
                    }
                }
            }
        }
    }

    #[test]
    fn hypervolume_known_values() {
        let r = [4.0, 4.0];
        let pts: Vec<&[f64]> = vec![&[1.0, 3.0], &[2.0, 2.0], &[3.0, 1.0]];
        assert!((hypervolume(&pts, &r) - 6.0).abs() < 1e-12);
        let r3 = [2.0, 2.0, 2.0];
        let pts3: Vec<&[f64]> = vec![&[1.0, 1.0, 1.0], &[0.0, 1.5, 1.5]];
        // 1 (the unit cube) + 2*0.5*0.5 - overlap 1*0.5*0.5 = 1.25
        assert!((hypervolume(&pts3, &r3) - 1.25).abs() < 1e-12);
        assert_eq!(hypervolume(&[&[5.0, 0.0][..]], &r), 0.0);
    }

    #[test]
    fn hssp_picks_the_spread() {
        let c = [1.0, 3.0, 1.1, 2.9, 3.0, 1.0, 2.0, 2.0];
        let picked = hssp_greedy(&c, 2, 2, &[4.0, 4.0]);
        assert_eq!(picked.len(), 2);
        assert!(picked.contains(&3)); // (2,2) adds the most alone
        // Repeats are taken only once the distinct points run out.
        let c = [1.0, 1.0, 1.0, 1.0, 2.0, 0.5];
        assert_eq!(hssp_greedy(&c, 2, 2, &[3.0, 3.0]).len(), 2);
        let mut p = hssp_greedy(&c, 2, 2, &[3.0, 3.0]);
        p.sort_unstable();
        assert_eq!(p, vec![0, 2]);
    }
}

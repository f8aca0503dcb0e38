//! The measured critical path of a deploy: the chain of steps that decided when it ended.
//! From the last step to finish, each step's blocker is the step it depends on that finished
//! last; a step that started well after its blocker finished (`waited`) waited on something
//! else than its dependencies (the engine's own pacing, an API call). Printed after a deploy and
//! kept in its JSON report, so an operator sees which services a faster deploy must speed up.
use serde::Serialize;

/// One step of the critical path, in the order they ran.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Link {
    pub step: String,
    /// Seconds from the deploy's start.
    pub started: f64,
    pub done: f64,
    /// Seconds between its blocker's end and its own start.
    pub waited: f64,
}

/// The chain of steps ending with the last one to finish. `deps[i]` are the steps step `i`
/// depends on; `times[i]` its start and end (`None` for a step that did not finish).
pub(crate) fn measured(
    names: &[String],
    deps: &[Vec<usize>],
    times: &[Option<(f64, f64)>],
) -> Vec<Link> {
    let done = |i: usize| times.get(i).copied().flatten();
    let Some(mut at) = (0..times.len())
        .filter_map(|i| done(i).map(|t| (i, t.1)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(i, _)| i)
    else {
        return Vec::new();
    };
    let mut chain = Vec::new();
    while let Some((started, finished)) = done(at) {
        let blocker = deps
            .get(at)
            .into_iter()
            .flatten()
            .filter_map(|&d| done(d).map(|t| (d, t.1)))
            .max_by(|a, b| a.1.total_cmp(&b.1));
        chain.push(Link {
            step: names.get(at).cloned().unwrap_or_default(),
            started,
            done: finished,
            waited: blocker.map_or(started, |(_, end)| (started - end).max(0.0)),
        });
        match blocker {
            Some((d, _)) => at = d,
            None => break,
        }
    }
    chain.reverse();
    chain
}

/// The chain as one line: each step with its own seconds, and the waits longer than a second.
pub(crate) fn line(chain: &[Link]) -> String {
    let total = chain.last().map_or(0.0, |l| l.done);
    let steps: Vec<String> = chain
        .iter()
        .map(|l| {
            let wait = if l.waited >= 1.0 {
                format!(" after {:.1} s waiting", l.waited)
            } else {
                String::new()
            };
            format!("{} {:.1} s{wait}", l.step, l.done - l.started)
        })
        .collect();
    format!(
        "critical path ({total:.1} s, {} steps): {}",
        chain.len(),
        steps.join(" → ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn the_chain_follows_the_dependency_that_finished_last() {
        // db (0-10) → keystone (10-30) → nova (31-60); cache (0-5) and horizon (5-50) are off
        // the path: horizon ends before nova, and nova does not depend on it.
        let n = names(&["db", "cache", "keystone", "horizon", "nova"]);
        let deps = vec![vec![], vec![], vec![0, 1], vec![1], vec![2]];
        let times = vec![
            Some((0.0, 10.0)),
            Some((0.0, 5.0)),
            Some((10.0, 30.0)),
            Some((5.0, 50.0)),
            Some((31.5, 60.0)),
        ];
        let chain = measured(&n, &deps, &times);
        let steps: Vec<&str> = chain.iter().map(|l| l.step.as_str()).collect();
        assert_eq!(steps, ["db", "keystone", "nova"]);
        assert_eq!(chain[2].waited, 1.5);
        assert_eq!(
            line(&chain),
            "critical path (60.0 s, 3 steps): db 10.0 s → keystone 20.0 s → nova 28.5 s after 1.5 s waiting"
        );
    }

    #[test]
    fn unfinished_steps_are_skipped_and_nothing_done_is_an_empty_path() {
        let n = names(&["a", "b"]);
        let deps = vec![vec![], vec![0]];
        assert!(measured(&n, &deps, &[None, None]).is_empty());
        // b failed (no end): the path ends at a.
        let chain = measured(&n, &deps, &[Some((0.0, 2.0)), None]);
        assert_eq!(chain.len(), 1);
        assert_eq!(chain[0].step, "a");
        assert_eq!(line(&[]), "critical path (0.0 s, 0 steps): ");
    }
}

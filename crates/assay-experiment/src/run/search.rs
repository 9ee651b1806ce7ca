//! Step 2, the study: the sampler asked trial after trial (replayed from the journal on
//! `--resume`), each trial's prompts run on the optimization cases (or reused, or raced), the
//! best kept, and the proposal rounds that grow the space.

#[allow(clippy::wildcard_imports)]
use super::*;
use assay_core::experiment::AgentChoice;

use crate::target::Answered;

/// The study's state while it runs: the sampler, the prompt lists (which proposals extend),
/// the trial records and the best trial's cases.
struct Search<'s, 'a> {
    x: &'s Experiment<'a>,
    runner: &'s Runner<'a>,
    layout: &'s Layout,
    journal: &'s mut Journal<'a>,
    replay: &'s Replay,
    baseline: &'s StepResult,
    log: StepLog,
    lists: PromptLists,
    study: Study,
    records: Vec<TrialRecord>,
    best_cases: Option<Vec<CaseResult>>,
    proposals: Vec<ProposalRecord>,
}

/// What the study leaves: the sampler, the trials, the grown lists and the proposals.
pub(super) struct Searched {
    pub(super) study: Study,
    pub(super) trials: Vec<TrialRecord>,
    pub(super) lists: PromptLists,
    pub(super) proposals: Vec<ProposalRecord>,
}

pub(super) async fn study<'a>(
    x: &Experiment<'a>,
    runner: &Runner<'a>,
    layout: &Layout,
    journal: &mut Journal<'a>,
    replay: &Replay,
    baseline: &StepResult,
) -> Result<Searched, RunError> {
    let options = x.options;
    let mut log = StepLog::open(layout, "optimization")?;
    let study = new_study(x)?;
    log.line(&format!(
        "study: {} agents, {} combinations, {} trials, seed {}, the baseline enqueued as trial 0; {}",
        x.lists.agents.len(),
        x.lists.combinations(),
        options.trials,
        options.seed,
        study.search_mode()
    ));
    let to_run = (0..options.trials)
        .filter(|n| !replay.trials.contains_key(n))
        .count();
    runner
        .services
        .progress
        .start("optimization", (to_run * x.optimization.set.len()) as u64);
    let mut search = Search {
        x,
        runner,
        layout,
        journal,
        replay,
        baseline,
        log,
        lists: x.lists.clone(),
        study,
        records: Vec::with_capacity(options.trials),
        best_cases: None,
        proposals: Vec::new(),
    };
    for _ in 0..options.trials {
        search.trial(None).await?;
    }
    let summary = search.summary();
    search.log.line(&format!("study: {summary}"));
    runner.services.progress.finish("optimization", &summary);
    if let Some(p) = &options.propose {
        for round in 1..=p.rounds {
            search.round(p, round).await?;
        }
        let summary = search.summary();
        search.log.line(&format!("study with proposals: {summary}"));
    }
    Ok(Searched {
        study: search.study,
        trials: search.records,
        lists: search.lists,
        proposals: search.proposals,
    })
}

/// The study of `x` before any trial: its space, objectives, seed and sampler settings, the
/// baseline enqueued as trial 0.
pub(super) fn new_study(x: &Experiment<'_>) -> Result<Study, RunError> {
    let options = x.options;
    let settings = SamplerSettings {
        n_startup_trials: options.startup_trials,
        budget: Some(options.trials),
        ..SamplerSettings::default()
    };
    let directions: Vec<Direction> = options
        .objectives
        .iter()
        .map(Objective::direction)
        .collect();
    let mut study = Study::with_settings(space_of(x.lists)?, directions, options.seed, settings)?;
    study.enqueue(vec![0; x.lists.agents.len()])?;
    Ok(study)
}

impl Search<'_, '_> {
    fn summary(&self) -> String {
        match self.study.best_by_priority() {
            Some(t) => format!(
                "{} trials, best trial {} {:?}, Pareto front {:?}",
                self.records.len(),
                t.number,
                t.values,
                self.study
                    .pareto_front()
                    .iter()
                    .map(|t| t.number)
                    .collect::<Vec<_>>()
            ),
            None => format!("{} trials, none complete", self.records.len()),
        }
    }

    /// Journals a finished trial and keeps its record.
    fn keep(&mut self, record: TrialRecord) -> Result<(), RunError> {
        self.journal.append(&JournalEntry::Trial {
            trial: record.clone(),
        })?;
        self.records.push(record);
        Ok(())
    }

    /// One trial: restored from the journal (`--resume`), or asked, then reused (a duplicate)
    /// or evaluated. `proposal` names the proposal a trial scores.
    async fn trial(&mut self, proposal: Option<&str>) -> Result<usize, RunError> {
        let (x, runner) = (self.x, self.runner);
        let n_cases = x.optimization.set.len();
        // Replayed trials are restored as they ended, not asked again: the study then asks
        // what it would have, and a study whose trials came from several workers (where
        // each asked with what was finished at the time) reads back the same way.
        let next = self.study.trials().len();
        if let Some(done) = self.replay.trials.get(&next) {
            let number = restore(&mut self.study, &self.lists, done)?;
            if done.outcome == TrialOutcome::Complete {
                update_best(&self.study, &mut self.best_cases, number, &done.cases);
            }
            self.records.push(done.clone());
            return Ok(number);
        }
        let asked = self.study.ask()?;
        let params = named(&self.lists, &asked.params);
        let started = Instant::now();
        let origin = |asked: &Asked| match proposal {
            Some(_) => "proposed".to_owned(),
            None => origin_name(asked.origin),
        };
        if let Some(earlier) = asked.duplicate_of {
            self.study.tell_duplicate(asked.number)?;
            let from = self.records.iter().find(|r| r.number == earlier);
            self.log.line(&format!(
                "trial {}: the same prompts as trial {earlier}: its values are reused, nothing is evaluated again",
                asked.number
            ));
            let record = TrialRecord {
                values: self
                    .study
                    .trial(asked.number)
                    .map(|t| t.values.clone())
                    .unwrap_or_default(),
                duplicate_of: Some(earlier),
                metrics: from.and_then(|r| r.metrics),
                origin: origin(&asked),
                ..blank(&asked, params, TrialOutcome::Duplicate, started)
            };
            self.keep(record)?;
            runner.services.progress.advance(
                n_cases as u64,
                &runner.note(&format!("trial {}", asked.number)),
            );
            return Ok(asked.number);
        }
        let scored = score(
            &Scoring {
                x,
                runner,
                layout: self.layout,
                lists: &self.lists,
                baseline: self.baseline,
                best_cases: self.best_cases.as_deref(),
            },
            &mut self.log,
            &asked,
            params,
            proposal,
            started,
        )
        .await?;
        match scored {
            Scored::Pruned(record) => {
                self.study.tell_pruned(asked.number)?;
                self.keep(record)?;
            }
            Scored::Complete(record) => {
                self.study.tell(asked.number, &record.values)?;
                update_best(
                    &self.study,
                    &mut self.best_cases,
                    asked.number,
                    &record.cases,
                );
                self.keep(record)?;
            }
            Scored::Failed(record, halted) => {
                self.study.tell_failed(asked.number)?;
                self.journal
                    .append(&JournalEntry::Trial { trial: record })?;
                runner.services.progress.finish("optimization", "halted");
                return Err(halted);
            }
        }
        Ok(asked.number)
    }

    /// The case results of trial `number` (a duplicate's: its original's; trial 0's: step 1's).
    fn cases_of(&self, number: usize) -> Vec<CaseResult> {
        let Some(t) = self.records.iter().find(|t| t.number == number) else {
            return self.baseline.cases.clone();
        };
        let t = match t.duplicate_of {
            Some(d) => self.records.iter().find(|o| o.number == d).unwrap_or(t),
            None => t,
        };
        if t.cases.is_empty() {
            self.baseline.cases.clone()
        } else {
            t.cases.clone()
        }
    }

    /// One proposal round: its proposals, each revising the best combination's prompt of the
    /// agent the selector picks (the blamed one, or every one); each accepted one is scored at
    /// once (the parent's other prompts, on every optimization case); then, when the space
    /// grew, `trials_per_round` more trials over it.
    async fn round(&mut self, p: &ProposeOptions, round: usize) -> Result<(), RunError> {
        let (x, runner) = (self.x, self.runner);
        let count = p.proposals_in_round();
        runner.services.progress.start(
            &format!("proposals r{round}"),
            (count * (2 * p.minibatch + x.optimization.set.len())) as u64,
        );
        let mut grew = false;
        let mut plan: Option<Vec<(String, AgentChoice)>> = None;
        for k in 1..=count {
            let sequence = (round - 1) * count + (k - 1);
            let record = if let Some(done) = self.replay.proposals.get(&(round, k)) {
                self.log.line(&format!(
                    "proposal r{round}-{k} ({}): read back from the journal (--resume)",
                    done.agent
                ));
                done.clone()
            } else {
                if plan.is_none() {
                    plan = Some(self.plan(p, round, count).await?);
                }
                let (agent, chosen) = plan
                    .as_ref()
                    .and_then(|plan| plan.get(k - 1))
                    .cloned()
                    .ok_or_else(|| RunError::Usage("no agent may be revised".into()))?;
                self.log.line(&format!(
                    "proposal r{round}-{k}: revises {agent}: {}",
                    chosen.why
                ));
                let record = self.propose(p, round, k, sequence, &agent).await?;
                let record = ProposalRecord {
                    chosen: Some(chosen),
                    ..record
                };
                self.journal.append(&JournalEntry::Proposal {
                    proposal: record.clone(),
                })?;
                record
            };
            let agent = record.agent.clone();
            let questions: Vec<&str> = record
                .cases_shown
                .iter()
                .filter_map(|line| {
                    x.optimization
                        .set
                        .cases
                        .iter()
                        .find(|c| c.case.line == *line)
                        .map(|c| c.case.question.as_str())
                })
                .collect();
            let file = crate::propose::write_provenance(
                x.project,
                &x.options.name,
                &record,
                &questions,
            )
            .map_err(|e| RunError::io(&crate::propose::proposed_dir(x.project, &agent), &e))?;
            let record = ProposalRecord { file, ..record };
            match &record.status {
                ProposalStatus::Accepted { index, trial } => {
                    let at = self
                        .lists
                        .agents
                        .iter()
                        .position(|a| a.agent == agent)
                        .ok_or_else(|| {
                            RunError::Usage(format!("proposal for unknown agent `{agent}`"))
                        })?;
                    let list = &mut self.lists.agents[at].prompts;
                    if *index != list.len() {
                        return Err(RunError::Usage(format!(
                            "{}: proposal r{round}-{k} joined {agent}'s list at {index}, but it has {} prompts now; start a new experiment",
                            self.layout.journal().display(),
                            list.len()
                        )));
                    }
                    list.push(crate::prompts::PromptFile {
                        index: *index,
                        file: record
                            .file
                            .as_ref()
                            .map_or_else(PathBuf::new, |f| x.project.join(f)),
                        text: record.text.clone(),
                    });
                    let budget = x.options.trials + p.max_trials();
                    self.study.add_choice(at, Some(budget))?;
                    let mut params = self
                        .study
                        .trial(record.parent_trial)
                        .map_or_else(|| vec![0; self.lists.agents.len()], |t| t.params.clone());
                    params[at] = *index;
                    self.study.enqueue(params)?;
                    let label = format!("proposal r{round}-{k} ({agent} #{index})");
                    self.log.line(&format!(
                        "{label}: accepted; scored on every optimization case next"
                    ));
                    let number = self.trial(Some(&label)).await?;
                    if number != *trial {
                        return Err(RunError::Usage(format!(
                            "{}: proposal r{round}-{k} was to be scored as trial {trial}, but the study numbered it {number}; start a new experiment",
                            self.layout.journal().display()
                        )));
                    }
                    grew = true;
                }
                ProposalStatus::Rejected { reason } | ProposalStatus::NotBetter { reason } => {
                    self.log.line(&format!(
                        "proposal r{round}-{k} ({agent}): not added: {reason}"
                    ));
                }
            }
            self.proposals.push(record);
        }
        if grew {
            for _ in 0..p.trials_per_round {
                self.trial(None).await?;
            }
        }
        let summary = self.summary();
        runner
            .services
            .progress
            .finish(&format!("proposals r{round}"), &summary);
        Ok(())
    }

    /// The best combination now: its trial, its prompt indices and its prompts.
    fn parent(&self) -> (usize, BTreeMap<String, usize>, BTreeMap<String, String>) {
        let parent_trial = self.study.best_by_priority().map_or(0, |t| t.number);
        let parent_params = self
            .records
            .iter()
            .find(|t| t.number == parent_trial)
            .map_or_else(
                || named(&self.lists, &vec![0; self.lists.agents.len()]),
                |t| t.params.clone(),
            );
        let parent_prompts = self.lists.choose(&parent_params);
        (parent_trial, parent_params, parent_prompts)
    }

    /// The cases at `shown` (indices into `results`) with the parent's traces on them (the
    /// chain's calls come from the cache).
    async fn traces(
        &self,
        prompts: &BTreeMap<String, String>,
        results: &[CaseResult],
        shown: &[usize],
        what: &str,
    ) -> Result<Vec<(LoadedCase, CaseResult, Answered)>, RunError> {
        let (x, runner) = (self.x, self.runner);
        let mut out = Vec::with_capacity(shown.len());
        for &i in shown {
            let r = &results[i];
            let Some(case) = x
                .optimization
                .set
                .cases
                .iter()
                .find(|c| c.case.line == r.line)
            else {
                continue;
            };
            runner.check_budget()?;
            let traced = runner
                .services
                .target
                .answer_traced(prompts, &case.case.question, &files_of(case))
                .await
                .map_err(|e| {
                    let failed = grade::errored(
                        r.line,
                        &r.question,
                        &r.expected,
                        None,
                        format!("target: {e}"),
                    );
                    halt(self.layout, "optimization", what, prompts, &failed)
                })?;
            runner.services.progress.advance(1, &runner.note(what));
            out.push((case.clone(), r.clone(), traced));
        }
        Ok(out)
    }

    /// The agents this round's `count` proposals revise, each with why (see
    /// [`crate::propose`]'s module docs).
    async fn plan(
        &mut self,
        p: &ProposeOptions,
        round: usize,
        count: usize,
    ) -> Result<Vec<(String, AgentChoice)>, RunError> {
        let (x, runner) = (self.x, self.runner);
        let turn = (round - 1) * count;
        // The order the agents run in (not their names' order): what the fallback goes by.
        let chain = x.options.chain.clone();
        if p.selector != crate::propose::Selector::Blame || p.agents.len() <= 1 {
            return Ok(crate::propose::choose(
                p.selector,
                Err(String::new()),
                &p.agents,
                &chain,
                count,
                turn,
            ));
        }
        let (_, _, parent_prompts) = self.parent();
        let results = self.cases_of(self.parent().0);
        let shown: Vec<usize> = crate::propose::minibatch(&results, p.minibatch, turn)
            .into_iter()
            .filter(|&i| crate::propose::failing(&results[i]))
            .collect();
        let what = format!("blame r{round}");
        let blame = if shown.is_empty() {
            Err("the best combination fails no optimization case".to_owned())
        } else {
            let traced = self
                .traces(&parent_prompts, &results, &shown, &what)
                .await?;
            // The trace's order; without one (the target reports no agent outputs) the
            // chain's, and the proposer judges from the instructions and the answers alone.
            let mut chain_order: Vec<String> = traced
                .first()
                .map(|(_, _, t)| t.steps.iter().map(|(a, _)| a.clone()).collect())
                .unwrap_or_default();
            if chain_order.is_empty() {
                chain_order.clone_from(&chain);
            }
            let proposer =
                runner.services.proposer.as_ref().ok_or_else(|| {
                    RunError::Usage("proposal rounds need a proposer model".into())
                })?;
            let views = crate::propose::Shown::all(&traced);
            runner.check_budget_for(runner.per_proposal)?;
            let asked = crate::propose::ask_blame(
                proposer.as_ref(),
                &views,
                &parent_prompts,
                &chain_order,
                p.max_tokens,
                round,
            )
            .await
            .map_err(|e| format!("the blame call to {} failed: {e}", proposer.model()));
            return Ok(crate::propose::choose(
                p.selector,
                asked,
                &p.agents,
                &chain_order,
                count,
                turn,
            ));
        };
        Ok(crate::propose::choose(
            p.selector, blame, &p.agents, &chain, count, turn,
        ))
    }

    /// Asks the proposer for a revision of `agent`'s prompt in the best combination, guards
    /// it and, if it passes, checks it on the cases it was written for.
    #[allow(clippy::many_single_char_names)]
    async fn propose(
        &mut self,
        p: &ProposeOptions,
        round: usize,
        k: usize,
        sequence: usize,
        agent: &str,
    ) -> Result<ProposalRecord, RunError> {
        let (x, runner) = (self.x, self.runner);
        let proposer = runner
            .services
            .proposer
            .as_ref()
            .ok_or_else(|| RunError::Usage("proposal rounds need a proposer model".into()))?;
        let (parent_trial, parent_params, parent_prompts) = self.parent();
        let parent_index = parent_params.get(agent).copied().unwrap_or(0);
        let parent_text = parent_prompts.get(agent).cloned().unwrap_or_default();
        let results = self.cases_of(parent_trial);
        let shown = crate::propose::minibatch(&results, p.minibatch, sequence);
        let what = format!("proposal r{round}-{k}");
        let traced = self
            .traces(&parent_prompts, &results, &shown, &what)
            .await?;
        let views = crate::propose::Shown::all(&traced);
        let configured = p.required.get(agent).cloned().unwrap_or_default();
        let required = crate::propose::required_markers(&parent_text, &configured);
        let user = crate::propose::user_prompt(
            agent,
            &parent_text,
            &views,
            &required,
            x.options.threshold,
        );
        runner.check_budget_for(runner.per_proposal)?;
        let reply = crate::propose::ask(
            proposer.as_ref(),
            crate::propose::request(user, p.max_tokens, sequence as u64),
        )
        .await
        .map_err(|e| {
            let context = format!("{what}: the proposer {} failed: {e}\n", proposer.model());
            RunError::Halted {
                step: "optimization".into(),
                message: format!("{what}: proposer {}: {e}", proposer.model()),
                log: error_log(self.layout, "optimization", &context),
            }
        })?;
        let cases_shown: Vec<usize> = traced.iter().map(|(c, _, _)| c.case.line).collect();
        let mut record = ProposalRecord {
            round,
            k,
            agent: agent.to_owned(),
            parent_trial,
            parent_index,
            parent_sha256: sha256_hex(&parent_text),
            cases_shown,
            model: proposer.model().to_owned(),
            reasoning: reply.reasoning,
            sha256: sha256_hex(&reply.prompt),
            text: reply.prompt,
            status: ProposalStatus::Rejected {
                reason: String::new(),
            },
            file: None,
            minibatch: None,
            chosen: None,
        };
        let list = self
            .lists
            .agent(agent)
            .ok_or_else(|| RunError::Usage(format!("proposal for unknown agent `{agent}`")))?;
        if let Err(reason) = crate::propose::guard(&record.text, list, &required) {
            record.status = ProposalStatus::Rejected { reason };
            return Ok(record);
        }
        // GEPA's minibatch check: the proposal must do better than its parent on the cases it
        // was written for before it is scored on all of them.
        let mut candidate = parent_prompts.clone();
        candidate.insert(agent.to_owned(), record.text.clone());
        let cases: Vec<LoadedCase> = traced.iter().map(|(c, _, _)| c.clone()).collect();
        let tried = runner.cases(&candidate, &cases, &what).await?;
        if let Some(failed) = first_error(&tried) {
            return Err(halt(self.layout, "optimization", &what, &candidate, failed));
        }
        let score = |rs: &[CaseResult]| {
            (
                rs.iter().filter(|r| r.factually_correct).count(),
                rs.iter().map(|r| r.composite_score).sum::<f64>(),
            )
        };
        let before: Vec<CaseResult> = traced.iter().map(|(_, r, _)| r.clone()).collect();
        let (b, a) = (score(&before), score(&tried));
        record.minibatch = Some([b, a]);
        let better = a.0 > b.0 || (a.0 == b.0 && a.1 > b.1 + 1e-9);
        record.status = if better {
            ProposalStatus::Accepted {
                index: list.prompts.len(),
                trial: self.study.trials().len(),
            }
        } else {
            ProposalStatus::NotBetter {
                reason: format!(
                    "on the {} cases it was written for: {} correct, composite {:.3} (parent: {} correct, {:.3})",
                    tried.len(),
                    a.0,
                    a.1,
                    b.0,
                    b.1
                ),
            }
        };
        Ok(record)
    }
}

fn update_best(
    study: &Study,
    best: &mut Option<Vec<CaseResult>>,
    number: usize,
    cases: &[CaseResult],
) {
    if study.best_by_priority().map(|t| t.number) == Some(number) {
        *best = Some(cases.to_vec());
    }
}

/// What scoring a trial needs besides its parameters.
pub(super) struct Scoring<'s, 'a> {
    pub(super) x: &'s Experiment<'a>,
    pub(super) runner: &'s Runner<'a>,
    pub(super) layout: &'s Layout,
    pub(super) lists: &'s PromptLists,
    pub(super) baseline: &'s StepResult,
    /// The best trial's cases so far, for racing.
    pub(super) best_cases: Option<&'s [CaseResult]>,
}

/// How a trial's evaluation ended.
pub(super) enum Scored {
    /// Every case scored: the record has its values and metrics.
    Complete(TrialRecord),
    /// Stopped early by racing.
    Pruned(TrialRecord),
    /// A case failed (an infrastructure error): the record, and the error that halts the study.
    Failed(TrialRecord, RunError),
}

/// Evaluates the prompts of `params` on the optimization cases: step 1's results for the
/// baseline prompts, raced against the best trial's cases when racing is on, every case
/// otherwise. Tells no study and journals nothing: the caller does.
pub(super) async fn score(
    s: &Scoring<'_, '_>,
    log: &mut StepLog,
    asked: &Asked,
    params: BTreeMap<String, usize>,
    proposal: Option<&str>,
    started: Instant,
) -> Result<Scored, RunError> {
    let (x, runner, options) = (s.x, s.runner, s.x.options);
    let n_cases = x.optimization.set.len();
    let origin = match proposal {
        Some(_) => "proposed".to_owned(),
        None => origin_name(asked.origin),
    };
    let prompts = s.lists.choose(&params);
    let what = format!("trial {}", asked.number);
    // Trial 0 is the baseline: step 1 already evaluated it on the same cases.
    let cases = if params.values().all(|&i| i == 0) {
        log.line(&format!(
            "{what}: the baseline prompts: step 1's results are used"
        ));
        runner
            .services
            .progress
            .advance(n_cases as u64, &runner.note(&what));
        s.baseline.cases.clone()
    } else if let (Some(fraction), Some(best)) = (options.racing, s.best_cases) {
        let k = ((fraction * n_cases as f64).ceil() as usize).clamp(1, n_cases);
        let first = runner
            .cases(&prompts, &x.optimization.set.cases[..k], &what)
            .await?;
        if first_error(&first).is_none()
            && k < n_cases
            && let Some(why) = clearly_worse(&best[..k.min(best.len())], &first, options.seed)
        {
            log.line(&format!("{what}: pruned by racing {why}"));
            runner
                .services
                .progress
                .advance((n_cases - k) as u64, &runner.note(&what));
            return Ok(Scored::Pruned(TrialRecord {
                metrics: Some(Metrics::of(&first)),
                cases: first,
                note: Some(why),
                origin,
                ..blank(asked, params, TrialOutcome::Pruned, started)
            }));
        }
        let mut all = first;
        if first_error(&all).is_none() {
            all.extend(
                runner
                    .cases(&prompts, &x.optimization.set.cases[k..], &what)
                    .await?,
            );
        }
        all
    } else {
        runner
            .cases(&prompts, &x.optimization.set.cases, &what)
            .await?
    };
    if let Some(failed) = first_error(&cases) {
        log.line(&format!("{what}: failed; the study halts"));
        let halted = halt(s.layout, "optimization", &what, &prompts, failed);
        let record = TrialRecord {
            note: failed.error.clone(),
            cases: cases.clone(),
            origin,
            ..blank(asked, params, TrialOutcome::Failed, started)
        };
        return Ok(Scored::Failed(record, halted));
    }
    let metrics = Metrics::of(&cases);
    let values = values_of(&metrics, &options.objectives);
    log.line(&format!(
        "{what} ({origin}): {} {}",
        serde_json::to_string(&params).unwrap_or_default(),
        metrics_line(&metrics)
    ));
    Ok(Scored::Complete(TrialRecord {
        values,
        metrics: Some(metrics),
        cases,
        note: proposal.map(|p| format!("scores {p}")),
        origin,
        ..blank(asked, params, TrialOutcome::Complete, started)
    }))
}

/// The sampler's index vector of a trial's named parameters (agents in the lists' order).
pub(super) fn raw_params(
    lists: &PromptLists,
    params: &BTreeMap<String, usize>,
) -> Result<Vec<usize>, RunError> {
    lists
        .agents
        .iter()
        .map(|a| {
            params.get(&a.agent).copied().ok_or_else(|| {
                RunError::Usage(format!(
                    "a recorded trial has no prompt for agent `{}`; start a new experiment",
                    a.agent
                ))
            })
        })
        .collect()
}

/// The sampler's origin of a recorded trial (proposed and unknown ones: added).
fn origin_of(name: &str) -> Origin {
    match name {
        "enqueued" => Origin::Enqueued,
        "random" => Origin::Random,
        "tpe" => Origin::Tpe,
        "exhaustive" => Origin::Exhaustive,
        _ => Origin::Added,
    }
}

/// Restores a recorded trial into `study` as it ended; returns its number.
pub(super) fn restore(
    study: &mut Study,
    lists: &PromptLists,
    done: &TrialRecord,
) -> Result<usize, RunError> {
    let state = match done.outcome {
        TrialOutcome::Complete | TrialOutcome::Duplicate => TrialState::Complete,
        TrialOutcome::Pruned => TrialState::Pruned,
        TrialOutcome::Failed => TrialState::Failed,
    };
    Ok(study.restore(
        raw_params(lists, &done.params)?,
        state,
        &done.values,
        origin_of(&done.origin),
    )?)
}

//! Steps that involve several partitions run with all of them quiesced (HyPer §3.4, §4.3).
//!
//! A quiesced step is one job on each involved executor. The jobs meet at a barrier before any
//! of them does its part, so every involved partition has finished whatever it ran before and
//! runs nothing else until the step ends; they meet again at the end, so none goes on before
//! all are done. A step that commits adds two meetings in the middle: after every part has run
//! (the first participant then decides, and draws the one commit timestamp), and after the
//! decision. Because the timestamp is drawn while every involved partition is paused, no
//! transaction can see it before every partition has stamped its versions.
//!
//! All steps are queued under one lock, so every executor meets them in the same order and
//! the barriers cannot deadlock. Executors never wait for anything else.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};

use parking_lot::Mutex;

use super::{Durable, Engine};
use crate::wal::{Logged, Lsn};
use crate::error::Result;
use crate::executor::Partition;
use crate::storage::Ts;
use crate::wal::RowChange;

/// The meeting point of one quiesced step.
pub(super) struct Quiesce {
    barrier: Barrier,
    /// Set by the first participant: the snapshot an autocommit statement reads.
    pub start: Mutex<Ts>,
    failed: AtomicBool,
    /// The decision: a commit timestamp, or `None` to roll back.
    decision: Mutex<Option<Ts>>,
    /// The row changes of every participant, logged as one record.
    redo: Mutex<Vec<RowChange>>,
    logged: Mutex<Option<Result<Option<Logged>>>>,
}

impl Quiesce {
    pub fn meet(&self) {
        // Nobody waits behind this executor's held-back wakes while it waits here.
        crate::executor::flush_wakes();
        self.barrier.wait();
    }

    pub fn report(&self, ok: bool) {
        if !ok {
            self.failed.store(true, Ordering::SeqCst);
        }
    }

    /// Logs the row changes of every participant as one redo record (appended by the first),
    /// so that a transaction over several partitions is redone as a whole or not at all.
    pub fn log(&self, first: bool, mine: Vec<RowChange>, append: impl FnOnce(Vec<RowChange>) -> Result<Option<Logged>>) -> Result<Option<Lsn>> {
        self.redo.lock().extend(mine);
        self.append_once(first, || append(std::mem::take(&mut *self.redo.lock())))
    }

    /// Once every participant has arrived, the first appends a record; everyone learns
    /// whether that worked, and the record's LSN.
    pub fn append_once(&self, first: bool, append: impl FnOnce() -> Result<Option<Logged>>) -> Result<Option<Lsn>> {
        self.meet();
        if first {
            *self.logged.lock() = Some(append());
        }
        self.meet();
        match self.logged.lock().as_ref() {
            Some(Err(e)) => Err(e.clone()),
            Some(Ok(logged)) => Ok(logged.as_ref().map(|l| l.lsn)),
            None => Ok(None),
        }
    }

    /// The durability token of the record the first participant appended.
    pub fn take_durable(&self) -> Option<Durable> {
        match self.logged.lock().as_mut() {
            Some(Ok(Some(logged))) => logged.durable.take(),
            _ => None,
        }
    }

    /// Whether the decision was to go ahead (every participant succeeded).
    pub fn decided(&self) -> bool {
        self.decision.lock().is_some()
    }

    /// After every participant has reported: the first decides (drawing a commit timestamp
    /// with `draw` if nobody failed), everyone learns the decision.
    pub fn decide(&self, first: bool, draw: impl FnOnce() -> Ts) -> Option<Ts> {
        self.meet();
        if first {
            *self.decision.lock() = (!self.failed.load(Ordering::SeqCst)).then(draw);
        }
        self.meet();
        *self.decision.lock()
    }
}

impl Engine {
    /// Runs `f` as one quiesced step on `parts` (each call gets the step and whether it is the
    /// first participant); returns each partition's result in the order of `parts`.
    pub(super) async fn quiesced<R, F>(&self, parts: &[usize], f: F) -> Result<Vec<R>>
    where
        R: Send + 'static,
        F: Fn(&mut Partition, &Quiesce, bool) -> R + Send + Sync + 'static,
    {
        Ok(self.quiesced_step(parts, f).await?.0)
    }

    /// [`quiesced`](Self::quiesced), also returning the step (for what its first participant
    /// logged).
    pub(super) async fn quiesced_step<R, F>(&self, parts: &[usize], f: F) -> Result<(Vec<R>, Arc<Quiesce>)>
    where
        R: Send + 'static,
        F: Fn(&mut Partition, &Quiesce, bool) -> R + Send + Sync + 'static,
    {
        let step = Arc::new(Quiesce {
            barrier: Barrier::new(parts.len()),
            start: Mutex::new(0),
            failed: AtomicBool::new(false),
            decision: Mutex::new(None),
            redo: Mutex::new(Vec::new()),
            logged: Mutex::new(None),
        });
        let f = Arc::new(f);
        let replies: Vec<_> = {
            let _order = self.quiesce_order.lock();
            parts
                .iter()
                .enumerate()
                .map(|(i, &p)| {
                    let (step, f) = (step.clone(), f.clone());
                    self.executors[p].call(move |partition| {
                        step.meet();
                        let r = f(partition, &step, i == 0);
                        step.meet();
                        r
                    })
                })
                .collect()
        };
        let mut out = Vec::with_capacity(replies.len());
        for r in replies {
            out.push(r.await?);
        }
        Ok((out, step))
    }
}

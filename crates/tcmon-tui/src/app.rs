//! The UI's state and what keys do to it. No terminal here: views read an [`App`], keys change
//! it through [`App::on_key`], and what the poller must do comes back as an [`Action`].

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use tcmon_agent::{Sample, State};
use tcmon_core::model::{Class, Interface, Qdisc, Snapshot};
use tcmon_core::rates::{ObjectKey, ObjectRates};
use tcmon_core::units::Handle;
use tcmon_diag::Severity;
use tcmon_render::{walk, Obj};

use crate::keys::{self, Command, Context};

/// What the caller must do after a key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    None,
    Quit,
    Pause(bool),
    Interval(Duration),
    /// Replaying a recording: move through it.
    Seek(tcmon_agent::replay::Seek),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pane {
    Tree,
    Detail,
    Latency,
    Findings,
}

/// How siblings are ordered; the tree shape always stays.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SortKey {
    /// The kernel's order: by handle.
    Tree,
    Rate,
    Drops,
    Backlog,
}

impl SortKey {
    fn next(self) -> SortKey {
        match self {
            SortKey::Tree => SortKey::Rate,
            SortKey::Rate => SortKey::Drops,
            SortKey::Drops => SortKey::Backlog,
            SortKey::Backlog => SortKey::Tree,
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            SortKey::Tree => "tree",
            SortKey::Rate => "rate",
            SortKey::Drops => "drops/s",
            SortKey::Backlog => "backlog",
        }
    }
}

/// One visible line of the tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub obj: Obj,
    pub depth: usize,
    pub key: ObjectKey,
    pub has_children: bool,
    pub folded: bool,
    /// Index of the parent's row.
    pub parent: Option<usize>,
}

/// What the last frame showed, for the next keys: where the tree window is and how long each
/// pane is. Here rather than in the view so that the state does not depend on how it is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrameInfo {
    pub tree_offset: usize,
    pub tree_rows: usize,
    /// Lines of the panes drawn (`None`: not on screen), to bound their scrolling. A pane may
    /// stop counting past the end of its window: then this is at least one more than its
    /// scroll, which bounds nothing yet.
    pub detail_lines: Option<usize>,
    pub latency_lines: Option<usize>,
    pub findings_lines: Option<usize>,
}

/// Poll intervals `+`/`-` step through (the agent's minimum is 100 ms).
const INTERVALS_MS: [u64; 9] = [100, 200, 500, 1000, 2000, 5000, 10_000, 30_000, 60_000];

#[derive(Debug)]
#[allow(clippy::struct_excessive_bools)] // independent toggles of the UI, not a state machine
pub struct App {
    state: Arc<State>,
    /// Shown in the header.
    pub host: String,
    /// False under NO_COLOR: emphasis by reverse video and text only.
    pub color: bool,
    iface: usize,
    /// The selected interface by name, to find it again when interfaces come and go.
    iface_name: Option<String>,
    /// Selection by identity, so rows appearing or vanishing above do not move it.
    selected: Option<ObjectKey>,
    /// Ancestors of the selection, root first: where it goes if the selected object vanishes.
    selected_path: Vec<ObjectKey>,
    cursor: usize,
    /// First tree row on screen, as the last frame drew it.
    tree_offset: usize,
    /// Tree rows the last frame had room for (page up/down).
    tree_page: usize,
    folded: HashSet<ObjectKey>,
    filter: String,
    editing_filter: bool,
    sort: SortKey,
    focus: Pane,
    paused: bool,
    interval: Duration,
    help: bool,
    rows: Vec<Row>,
    /// The worst warning or critical finding per object of the selected interface, so a frame
    /// looks flags up instead of scanning findings. By handle: findings name objects in tc
    /// notation, and a merged one names every object, so a poll of 50,000 flagged classes
    /// would otherwise copy and hash as many strings.
    flagged: Flags,
    /// Width of the tree's HANDLE column with every subtree unfolded, so that folding, a
    /// filter or scrolling never shifts the columns.
    handle_width: usize,
    /// Samples of the selected object, oldest first (the caller fetches them from the agent).
    pub history: Vec<Sample>,
    detail_scroll: usize,
    findings_scroll: usize,
    latency_scroll: usize,
    /// `poll_errors_total` at the last good poll: the agent keeps `last_error` after polls
    /// succeed again, so the last poll failed only if errors grew since.
    errors_at_good_poll: u64,
}

impl App {
    pub fn new(state: Arc<State>, host: String, color: bool) -> App {
        let iface = default_interface(&state.snapshot, state.default_route.as_deref());
        // Nothing tells whether the state given first came from a failed poll but its error:
        // taken as the latest poll's.
        let errors_at_good_poll = state
            .poll_errors_total
            .saturating_sub(u64::from(state.last_error.is_some()));
        let mut app = App {
            errors_at_good_poll,
            iface_name: state.snapshot.interfaces.get(iface).map(|i| i.name.clone()),
            paused: state.paused,
            interval: state.interval,
            state,
            host,
            color,
            iface,
            selected: None,
            selected_path: Vec::new(),
            cursor: 0,
            tree_offset: 0,
            tree_page: 10,
            folded: HashSet::new(),
            filter: String::new(),
            editing_filter: false,
            sort: SortKey::Tree,
            focus: Pane::Tree,
            help: false,
            handle_width: 0,
            rows: Vec::new(),
            flagged: Flags::default(),
            history: Vec::new(),
            detail_scroll: 0,
            findings_scroll: 0,
            latency_scroll: 0,
        };
        app.rebuild();
        app
    }

    /// A new poll: the same interface and object stay selected if they still exist.
    pub fn set_state(&mut self, state: Arc<State>) {
        if state.polls_total != self.state.polls_total {
            self.errors_at_good_poll = state.poll_errors_total;
        }
        self.state = state;
        let ifaces = &self.state.snapshot.interfaces;
        self.iface = match self
            .iface_name
            .as_ref()
            .and_then(|n| ifaces.iter().position(|i| &i.name == n))
        {
            Some(i) => i,
            None => {
                let i =
                    default_interface(&self.state.snapshot, self.state.default_route.as_deref());
                self.iface_name = ifaces.get(i).map(|i| i.name.clone());
                i
            }
        };
        self.rebuild();
    }

    pub fn state(&self) -> &State {
        &self.state
    }

    /// The error of the latest poll, if it failed (the screen shows the last good one).
    pub fn poll_failed(&self) -> Option<&str> {
        self.state
            .last_error
            .as_deref()
            .filter(|_| self.state.poll_errors_total > self.errors_at_good_poll)
    }

    pub fn interface(&self) -> Option<&Interface> {
        self.state.snapshot.interfaces.get(self.iface)
    }

    pub fn interface_index(&self) -> usize {
        self.iface
    }

    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// Characters the HANDLE column needs for the whole tree of the selected interface.
    pub fn handle_width(&self) -> usize {
        self.handle_width
    }

    pub fn cursor(&self) -> usize {
        self.cursor
    }

    pub fn selected(&self) -> Option<&ObjectKey> {
        self.selected.as_ref()
    }

    pub fn selected_row(&self) -> Option<&Row> {
        self.rows.get(self.cursor)
    }

    /// The object whose history the detail shows for the selection: itself, or for a class
    /// without counters of its own the qdisc that counts for it.
    pub fn history_key(&self) -> Option<ObjectKey> {
        let (iface, row) = (self.interface()?, self.selected_row()?);
        let owner = match row.obj {
            Obj::Class(i) => counters_owner(iface, &iface.classes[i]),
            Obj::Qdisc(_) => None,
        };
        Some(owner.map_or_else(|| row.key.clone(), |q| ObjectKey::qdisc(iface, q)))
    }

    /// The worst warning or critical finding about `object` (tc notation) on the selected
    /// interface.
    pub fn flag(&self, object: &str) -> Option<Severity> {
        self.flag_of(canonical_handle(object)?)
    }

    /// [`App::flag`] by handle: what `flag(&h.to_string())` says, without the string.
    pub fn flag_of(&self, h: Handle) -> Option<Severity> {
        self.flagged.get(&h).copied()
    }

    pub fn rates_of(&self, key: &ObjectKey) -> Option<&ObjectRates> {
        self.state.rates.as_ref()?.get(key)
    }

    pub fn filter(&self) -> &str {
        &self.filter
    }

    pub fn editing_filter(&self) -> bool {
        self.editing_filter
    }

    pub fn sort(&self) -> SortKey {
        self.sort
    }

    pub fn focus(&self) -> Pane {
        self.focus
    }

    pub fn paused(&self) -> bool {
        self.paused
    }

    pub fn interval(&self) -> Duration {
        self.interval
    }

    pub fn help(&self) -> bool {
        self.help
    }

    pub fn scroll(&self, pane: Pane) -> usize {
        match pane {
            Pane::Tree => self.tree_offset,
            Pane::Detail => self.detail_scroll,
            Pane::Latency => self.latency_scroll,
            Pane::Findings => self.findings_scroll,
        }
    }

    /// What the last frame showed: where the tree window is, how long each pane was (scrolling
    /// past the end of a pane stops there).
    pub fn after_frame(&mut self, info: FrameInfo) {
        self.tree_offset = info.tree_offset;
        self.tree_page = info.tree_rows;
        let clamp = |scroll: &mut usize, lines: Option<usize>| {
            if let Some(n) = lines {
                *scroll = (*scroll).min(n.saturating_sub(1));
            }
        };
        clamp(&mut self.detail_scroll, info.detail_lines);
        clamp(&mut self.latency_scroll, info.latency_lines);
        clamp(&mut self.findings_scroll, info.findings_lines);
    }

    /// The panes Tab cycles through: the latency pane only when probes are configured.
    pub fn panes(&self) -> Vec<Pane> {
        let mut p = vec![Pane::Tree, Pane::Detail];
        if !self.state.probes.is_empty() {
            p.push(Pane::Latency);
        }
        p.push(Pane::Findings);
        p
    }

    /// A replay's move for `c`; nothing when the screen is live.
    fn seek(&self, c: Command) -> Action {
        use tcmon_agent::replay::Seek;
        if self.state().replay.is_none() {
            return Action::None;
        }
        Action::Seek(match c {
            Command::SecondBack => Seek::By(-1_000),
            Command::SecondForward => Seek::By(1_000),
            Command::MinuteBack => Seek::By(-60_000),
            Command::MinuteForward => Seek::By(60_000),
            Command::PrevEvent => Seek::PrevEvent,
            _ => Seek::NextEvent,
        })
    }

    pub fn on_key(&mut self, k: KeyEvent) -> Action {
        if k.kind == KeyEventKind::Release {
            return Action::None;
        }
        let context = if self.editing_filter {
            Context::Filter
        } else if self.help {
            Context::Help
        } else if !self.filter.is_empty() {
            Context::Filtered
        } else {
            Context::Main
        };
        let replaying = self.state().replay.is_some() && !self.editing_filter && !self.help;
        let Some(binding) = keys::binding(context, &k).or_else(|| {
            replaying
                .then(|| keys::binding(Context::Replay, &k))
                .flatten()
        }) else {
            return Action::None;
        };
        // While typing, keys held with Alt or Ctrl do nothing but those that work everywhere:
        // Alt-x arrives as ESC x when keys come fast, and neither is filter text.
        if self.editing_filter
            && !binding.everywhere
            && k.modifiers
                .intersects(KeyModifiers::ALT | KeyModifiers::CONTROL)
        {
            return Action::None;
        }
        match binding.command {
            Command::Quit => return Action::Quit,
            Command::Up => self.move_by(-1),
            Command::Down => self.move_by(1),
            Command::PageUp => self.move_by(-(self.tree_page.max(1) as isize)),
            Command::PageDown => self.move_by(self.tree_page.max(1) as isize),
            Command::Top => self.move_by(isize::MIN / 2),
            Command::Bottom => self.move_by(isize::MAX / 2),
            Command::PrevInterface => self.switch_interface(-1),
            Command::NextInterface => self.switch_interface(1),
            Command::Fold => self.toggle_fold(),
            Command::NextPane => self.cycle_focus(1),
            Command::PrevPane => self.cycle_focus(-1),
            Command::Findings => self.focus = Pane::Findings,
            Command::Filter => self.editing_filter = true,
            Command::Sort => {
                self.sort = self.sort.next();
                self.rebuild();
            }
            Command::Pause => {
                self.paused = !self.paused;
                return Action::Pause(self.paused);
            }
            Command::Slower => return self.step_interval(1),
            Command::Faster => return self.step_interval(-1),
            Command::Help => self.help = true,
            Command::SecondBack
            | Command::SecondForward
            | Command::MinuteBack
            | Command::MinuteForward
            | Command::PrevEvent
            | Command::NextEvent => return self.seek(binding.command),
            // Any key closes the help and does nothing else, q and Esc too: a quit key
            // pressed to leave the help must not leave tcmon (Ctrl-C still does).
            Command::CloseHelp => self.help = false,
            Command::FilterKeep => self.editing_filter = false,
            Command::ClearFilter => {
                self.filter.clear();
                self.rebuild();
            }
            Command::FilterClear => {
                self.editing_filter = false;
                self.filter.clear();
                self.rebuild();
            }
            Command::FilterErase => {
                self.filter.pop();
                self.rebuild();
            }
            Command::FilterType => {
                if let KeyCode::Char(c) = k.code {
                    self.filter.push(c);
                    self.rebuild();
                }
            }
        }
        Action::None
    }

    fn move_by(&mut self, delta: isize) {
        let scroll = match self.focus {
            Pane::Tree => {
                if self.rows.is_empty() {
                    return;
                }
                let last = self.rows.len() - 1;
                self.cursor = self.cursor.saturating_add_signed(delta).min(last);
                self.sync_selection();
                return;
            }
            Pane::Detail => &mut self.detail_scroll,
            Pane::Latency => &mut self.latency_scroll,
            Pane::Findings => &mut self.findings_scroll,
        };
        // Views clamp scrolls to their content; this only keeps the number sane.
        *scroll = scroll.saturating_add_signed(delta).min(100_000);
    }

    fn switch_interface(&mut self, delta: isize) {
        let n = self.state.snapshot.interfaces.len();
        if n == 0 {
            return;
        }
        self.iface = (self.iface as isize + delta).rem_euclid(n as isize) as usize;
        self.iface_name = Some(self.state.snapshot.interfaces[self.iface].name.clone());
        self.selected = None;
        self.selected_path.clear();
        self.cursor = 0;
        self.tree_offset = 0;
        self.detail_scroll = 0;
        self.rebuild();
    }

    fn toggle_fold(&mut self) {
        if self.focus != Pane::Tree {
            return;
        }
        let Some(row) = self.rows.get(self.cursor) else {
            return;
        };
        if !row.has_children {
            return;
        }
        if !self.folded.remove(&row.key) {
            self.folded.insert(row.key.clone());
        }
        self.rebuild();
    }

    fn cycle_focus(&mut self, delta: isize) {
        let panes = self.panes();
        let at = panes.iter().position(|p| *p == self.focus).unwrap_or(0);
        self.focus = panes[(at as isize + delta).rem_euclid(panes.len() as isize) as usize];
    }

    fn step_interval(&mut self, dir: i32) -> Action {
        let cur = self.interval.as_millis() as u64;
        let next = if dir > 0 {
            INTERVALS_MS.iter().copied().find(|&ms| ms > cur)
        } else {
            INTERVALS_MS.iter().rev().copied().find(|&ms| ms < cur)
        };
        match next {
            Some(ms) => {
                self.interval = Duration::from_millis(ms);
                Action::Interval(self.interval)
            }
            None => Action::None,
        }
    }

    /// Rebuilds the visible rows of the selected interface (after a poll, a fold, the filter or
    /// the sort changed) and finds the selection again by identity.
    fn rebuild(&mut self) {
        self.flagged.clear();
        let Some(iface) = self.state.snapshot.interfaces.get(self.iface) else {
            self.rows.clear();
            self.handle_width = 0;
            self.cursor = 0;
            self.selected = None;
            return;
        };
        for f in self.state.findings.iter() {
            if f.interface == iface.name && f.severity >= Severity::Warning {
                // a merged finding flags each of its objects, at that object's own severity
                let objects = if f.objects.is_empty() {
                    std::slice::from_ref(&f.object)
                } else {
                    &f.objects[..]
                };
                for (i, o) in objects.iter().enumerate() {
                    let sev = f.severities.get(i).copied().unwrap_or(f.severity);
                    if sev < Severity::Warning {
                        // objects come worst first: the rest are information too
                        break;
                    }
                    if let Some(h) = canonical_handle(o) {
                        let e = self.flagged.entry(h).or_insert(sev);
                        *e = (*e).max(sev);
                    }
                }
            }
        }
        self.handle_width = walk(iface)
            .iter()
            .map(|n| {
                let h = handle_kind(iface, n.obj).0;
                // as view's name_cell lays it out: indent, fold marker, handle; and a finding's ` !`
                let flag = if self.flagged.contains_key(&h) { 2 } else { 0 };
                n.depth + 2 + h.write_tc(&mut [0; 16]).len() + flag
            })
            .max()
            .unwrap_or(0);
        self.rows = visible_rows(
            iface,
            &self.state.names,
            self.state.rates.as_deref(),
            &self.folded,
            &self.filter.to_lowercase(),
            self.sort,
        );
        if self.rows.is_empty() {
            self.cursor = 0;
            return;
        }
        let find = |k: &ObjectKey| self.rows.iter().position(|r| &r.key == k);
        self.cursor = self
            .selected
            .as_ref()
            .and_then(find)
            .or_else(|| self.selected_path.iter().rev().find_map(find))
            .unwrap_or(self.cursor)
            .min(self.rows.len() - 1);
        self.sync_selection();
    }

    fn sync_selection(&mut self) {
        let Some(row) = self.rows.get(self.cursor) else {
            return;
        };
        if self.selected.as_ref() != Some(&row.key) {
            self.detail_scroll = 0;
        }
        self.selected = Some(row.key.clone());
        self.selected_path.clear();
        let mut p = row.parent;
        while let Some(i) = p {
            self.selected_path.push(self.rows[i].key.clone());
            p = self.rows[i].parent;
        }
        self.selected_path.reverse();
    }
}

/// What a key does while the first poll is still being read (nothing to move or fold yet):
/// the quit keys quit, the rest do nothing.
pub fn waiting_key(k: KeyEvent) -> Action {
    if k.kind != KeyEventKind::Release && keys::command(Context::Main, &k) == Some(Command::Quit) {
        Action::Quit
    } else {
        Action::None
    }
}

/// Flags by handle (rustc-hash 2 folds the high bits of its product into the low ones, which
/// the table indexes by: qdisc handles have a zero minor).
type Flags = HashMap<Handle, Severity, rustc_hash::FxBuildHasher>;

/// The handle `object` names in tc notation, if it is spelled as `Handle`'s `Display` spells
/// it: what a handle's `to_string()` would have matched.
fn canonical_handle(object: &str) -> Option<Handle> {
    let h: Handle = object.parse().ok()?;
    (h.write_tc(&mut [0; 16]) == object).then_some(h)
}

/// The interface to open on (an index into `snap.interfaces`), given the interface of the
/// default route (`uplink`, as the agent read it) if any. Where something shapes: the uplink
/// if it shapes, else the interface with the most classes, then the most qdiscs. Where nothing
/// does: the uplink, else the interface other than `lo` that sent the most. Then the lowest
/// ifindex. The kernel's defaults count for nothing, so `lo` (noqueue) or a multiqueue NIC
/// (mq, a class and a qdisc per queue) does not outrank a shaper.
pub fn default_interface(snap: &Snapshot, uplink: Option<&str>) -> usize {
    use std::cmp::Reverse;
    snap.interfaces
        .iter()
        .enumerate()
        .min_by_key(|(_, i)| {
            let (classes, qdiscs) = configured_objects(i);
            let shapes = classes + qdiscs > 0;
            let is_uplink = uplink == Some(i.name.as_str());
            let sent: u64 = i
                .qdiscs
                .iter()
                .filter(|q| q.parent == Handle::ROOT)
                .map(|q| q.stats.bytes)
                .sum();
            (
                Reverse(shapes && is_uplink),
                Reverse(classes),
                Reverse(qdiscs),
                Reverse(is_uplink),
                i.name == "lo",
                Reverse(sent),
                i.ifindex,
            )
        })
        .map_or(0, |(n, _)| n)
}

/// Classes and qdiscs of `iface` that someone configured: not the kernel's default kinds, nor
/// mq's per-queue classes and the qdiscs it puts on them (`default_qdisc`, often fq_codel).
fn configured_objects(iface: &Interface) -> (usize, usize) {
    let mq: Vec<u16> = iface
        .qdiscs
        .iter()
        .filter(|q| q.kind == "mq")
        .map(|q| q.handle.major())
        .collect();
    let classes = iface
        .classes
        .iter()
        .filter(|c| !mq.contains(&c.handle.major()))
        .count();
    let qdiscs = iface
        .qdiscs
        .iter()
        .filter(|q| !is_default_kind(&q.kind) && !mq.contains(&q.parent.major()))
        .count();
    (classes, qdiscs)
}

/// Class kinds the kernel dumps without counters: TBF's and netem's one class (1:1, over
/// their inner qdisc) carry no statistics, so they read 0 whatever passes. Everything that
/// goes through the class goes through its qdisc: its counters are the class's.
const CLASSES_WITHOUT_COUNTERS: [&str; 2] = ["tbf", "netem"];

/// The qdisc whose counters stand for `class`'s, for a class of a kind without counters of its
/// own. Only while the class's counters are empty: should a kernel ever count there, those
/// are the class's.
pub fn counters_owner<'a>(iface: &'a Interface, class: &Class) -> Option<&'a Qdisc> {
    if !CLASSES_WITHOUT_COUNTERS.contains(&&*class.kind)
        || class.stats.bytes != 0
        || class.stats.packets != 0
    {
        return None;
    }
    let owner = Handle::new(class.handle.major(), 0);
    iface.qdisc(owner).filter(|q| q.kind == class.kind)
}

/// Root qdiscs that shape nothing: what a host has before anyone configures tc.
pub fn is_default_kind(kind: &str) -> bool {
    matches!(kind, "noqueue" | "pfifo_fast" | "mq")
}

/// True when no interface has anything but the kernel's defaults (noqueue, pfifo_fast, and mq
/// over them).
pub fn nothing_to_shape(snap: &Snapshot) -> bool {
    snap.interfaces.iter().all(|i| {
        i.qdiscs
            .iter()
            .filter(|q| q.parent != Handle::INGRESS)
            .all(|q| is_default_kind(&q.kind))
    })
}

pub fn object_key(iface: &Interface, obj: Obj) -> ObjectKey {
    match obj {
        Obj::Qdisc(i) => ObjectKey::qdisc(iface, &iface.qdiscs[i]),
        Obj::Class(i) => ObjectKey::class(iface, &iface.classes[i]),
    }
}

fn handle_kind(iface: &Interface, obj: Obj) -> (Handle, &str) {
    match obj {
        Obj::Qdisc(i) => (iface.qdiscs[i].handle, &iface.qdiscs[i].kind),
        Obj::Class(i) => (iface.classes[i].handle, &iface.classes[i].kind),
    }
}

fn backlog_bytes(iface: &Interface, obj: Obj) -> u64 {
    match obj {
        Obj::Qdisc(i) => iface.qdiscs[i].stats.backlog_bytes,
        Obj::Class(i) => iface.classes[i].stats.backlog_bytes,
    }
}

/// The tree of `iface` as rows: siblings in `sort` order, folded subtrees hidden, and with a
/// filter only the matches and their ancestors (folds are ignored then, so no match hides). The
/// filter matches a handle, a kind, and a class's name, circuit ID, parent node, devices and
/// addresses from `names`.
pub fn visible_rows<S: std::hash::BuildHasher>(
    iface: &Interface,
    names: &tcmon_names::Names,
    rates: Option<&tcmon_core::rates::Rates>,
    folded: &HashSet<ObjectKey, S>,
    filter_lower: &str,
    sort: SortKey,
) -> Vec<Row> {
    let tree = iface.topology();
    let nodes = tree.preorder();
    let n = nodes.len();
    let parent: Vec<Option<usize>> = nodes
        .iter()
        .map(|node| tree.parent(node.obj).map(|p| tree.position(p)))
        .collect();
    // Copies, since sorting reorders siblings; in one buffer, as a Vec per node is an
    // allocation per class with a leaf qdisc.
    let mut kids: Vec<usize> = Vec::with_capacity(n);
    let kid_span: Vec<(usize, usize)> = nodes
        .iter()
        .map(|node| {
            let start = kids.len();
            kids.extend(tree.children(node.obj).iter().map(|&c| tree.position(c)));
            (start, kids.len())
        })
        .collect();
    let mut roots: Vec<usize> = (0..n).filter(|&i| parent[i].is_none()).collect();
    let keys: Vec<ObjectKey> = nodes.iter().map(|n| object_key(iface, n.obj)).collect();
    if sort != SortKey::Tree {
        // Descending; objects without a rate yet sort last. Stable: ties keep tree order.
        let metric: Vec<f64> = nodes
            .iter()
            .zip(&keys)
            .map(|(node, key)| {
                let r = rates.and_then(|r| r.get(key));
                match sort {
                    SortKey::Rate => r.and_then(|r| r.bits_per_sec).unwrap_or(-1.0),
                    SortKey::Drops => r.and_then(|r| r.drops_per_sec).unwrap_or(-1.0),
                    SortKey::Backlog => backlog_bytes(iface, node.obj) as f64,
                    SortKey::Tree => 0.0,
                }
            })
            .collect();
        let by = |a: &usize, b: &usize| metric[*b].total_cmp(&metric[*a]);
        roots.sort_by(by);
        for &(start, end) in &kid_span {
            kids[start..end].sort_by(by);
        }
    }
    let children = |i: usize| &kids[kid_span[i].0..kid_span[i].1];
    let keep: Vec<bool> = if filter_lower.is_empty() {
        vec![true; n]
    } else {
        let mut keep: Vec<bool> = nodes
            .iter()
            .map(|node| {
                let (h, kind) = handle_kind(iface, node.obj);
                h.write_tc(&mut [0; 16]).contains(filter_lower)
                    || kind.to_lowercase().contains(filter_lower)
                    || (matches!(node.obj, Obj::Class(_))
                        && names
                            .lookup(&iface.name, h)
                            .is_some_and(|e| e.matches(filter_lower)))
            })
            .collect();
        // Preorder puts children after parents: backwards, a match reaches every ancestor.
        for i in (0..n).rev() {
            if keep[i] {
                if let Some(p) = parent[i] {
                    keep[p] = true;
                }
            }
        }
        keep
    };
    let mut rows = Vec::with_capacity(n);
    let mut todo: Vec<(usize, Option<usize>)> = roots.iter().rev().map(|&r| (r, None)).collect();
    while let Some((i, parent_row)) = todo.pop() {
        if !keep[i] {
            continue;
        }
        let has_children = children(i).iter().any(|&c| keep[c]);
        let folded = has_children && filter_lower.is_empty() && folded.contains(&keys[i]);
        let row = rows.len();
        rows.push(Row {
            obj: nodes[i].obj,
            depth: nodes[i].depth,
            key: keys[i].clone(),
            has_children,
            folded,
            parent: parent_row,
        });
        if !folded {
            todo.extend(children(i).iter().rev().map(|&c| (c, Some(row))));
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_are_named_as_display_names_them() {
        let mut handles = vec![Handle::ROOT, Handle::UNSPEC, Handle::INGRESS];
        for major in [0, 1, 0xf, 0x10, 0xab, 0x100, 0xfff, 0x1000, 0xffff] {
            for minor in [0, 1, 0xa, 0x10, 0x1ff, 0x2000, 0xfff1, 0xffff] {
                handles.push(Handle::new(major, minor));
            }
        }
        for h in handles {
            assert_eq!(h.write_tc(&mut [0; 16]), h.to_string());
            assert_eq!(canonical_handle(&h.to_string()), Some(h));
        }
        // what no handle's to_string() is: nothing is flagged by it
        for o in ["", "eth0", "1:010", "01:1", "1:A", "none", "0:0", ":"] {
            assert_eq!(canonical_handle(o), None, "{o}");
        }
    }
}

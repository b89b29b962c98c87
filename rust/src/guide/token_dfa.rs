//! An explicit DFA over token ids: states, sorted transitions, accepting flags.
//!
//! This is the representation DirectMerge rewrites merge by merge, and the one a `direct`
//! guide stores. Transitions of a state are kept sorted by token id so lookups are binary
//! searches and two DFAs can be compared state by state.

/// See the module docs. State 0 is not special; `start` says where to begin.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TokenDfa {
    pub start: u32,
    pub accepting: Vec<bool>,
    /// `transitions[s]`: `(token, target)` sorted by token, at most one per token.
    pub transitions: Vec<Vec<(u32, u32)>>,
}

impl TokenDfa {
    pub fn num_states(&self) -> usize {
        self.accepting.len()
    }

    pub fn num_transitions(&self) -> usize {
        self.transitions.iter().map(Vec::len).sum()
    }

    /// The target of `token` from `state`.
    pub fn next(&self, state: u32, token: u32) -> Option<u32> {
        let tr = &self.transitions[state as usize];
        tr.binary_search_by_key(&token, |e| e.0).ok().map(|i| tr[i].1)
    }

    /// Whether `tokens` is accepted.
    pub fn accepts(&self, tokens: &[u32]) -> bool {
        let mut s = self.start;
        for &t in tokens {
            match self.next(s, t) {
                Some(n) => s = n,
                None => return false,
            }
        }
        self.accepting[s as usize]
    }

    /// Keeps the relevant states (reachable and co-reachable), renumbered breadth-first from
    /// the start. An empty language gives a DFA with no states.
    pub fn trim(&self) -> TokenDfa {
        let n = self.num_states();
        let mut reverse: Vec<Vec<u32>> = vec![Vec::new(); n];
        for (s, tr) in self.transitions.iter().enumerate() {
            for &(_, t) in tr {
                reverse[t as usize].push(s as u32);
            }
        }
        let mut co = vec![false; n];
        let mut stack: Vec<u32> = (0..n as u32).filter(|&s| self.accepting[s as usize]).collect();
        for &s in &stack {
            co[s as usize] = true;
        }
        while let Some(s) = stack.pop() {
            for &p in &reverse[s as usize] {
                if !co[p as usize] {
                    co[p as usize] = true;
                    stack.push(p);
                }
            }
        }
        if n == 0 || !co[self.start as usize] {
            return TokenDfa::default();
        }
        let mut id = vec![u32::MAX; n];
        let mut order = vec![self.start];
        id[self.start as usize] = 0;
        let mut i = 0;
        while i < order.len() {
            let s = order[i];
            i += 1;
            for &(_, t) in &self.transitions[s as usize] {
                if co[t as usize] && id[t as usize] == u32::MAX {
                    id[t as usize] = order.len() as u32;
                    order.push(t);
                }
            }
        }
        TokenDfa {
            start: 0,
            accepting: order.iter().map(|&s| self.accepting[s as usize]).collect(),
            transitions: order
                .iter()
                .map(|&s| {
                    self.transitions[s as usize]
                        .iter()
                        .filter(|e| id[e.1 as usize] != u32::MAX)
                        .map(|&(t, to)| (t, id[to as usize]))
                        .collect()
                })
                .collect(),
        }
    }
}

//! Serving a table over virtual homes on any replica count.
//!
//! A homes table (`data::table::VirtualHomes`) votes for V virtual homes, each trained onto
//! one of R0 replicas and weighing the work routed to it in training. To serve R replicas,
//! [`rebalance`] assigns the homes to the R slots and [`for_replicas`] compiles the ordinary
//! R-replica table of that assignment: each vote for home `h` becomes a vote for its slot
//! (two homes of one term on one slot add up). This is how consistent hashing maps virtual
//! nodes to servers, with two differences: the homes weigh what they were measured to
//! carry, and the assignment starts from the trained one, so only what balance needs moves.
//!
//! [`rebalance`] is a pure function of (work, trained assignment, slot set): every balancer
//! with the same slots computes the same table without talking to the others, and going
//! back to the trained slots gives back the trained table exactly (8 → 12 → 8 replicas
//! restores what 8 served).

use std::collections::BTreeMap;

use data::table::{
    TableRow, VirtualHomes, VotingTable, KEY_VHOMES_REPLICAS, KEY_VHOMES_TRAINED, KEY_VHOMES_WORK,
};

use crate::MAX_REPLICAS;

/// Why a table over virtual homes cannot be mapped onto a set of replicas (its homes are
/// invalid, or the set is empty or larger than the homes or [`MAX_REPLICAS`]).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct MappingError(String);

/// How far from the mean load [`rebalance`] lets a slot stay without moving homes. Trained
/// tables keep their replicas' work within about 2% of the mean; at 1% the standard
/// evaluation on 10 to 16 replicas reads the same or fewer miss bytes than at 5% (the
/// balancer's load-bound slack): docs/learner.md, "Virtual homes".
pub const BALANCE_SLACK: f64 = 0.01;

/// Metadata key of a compiled table's assignment (the slot of each home), for operators.
pub const KEY_ASSIGNMENT: &str = "ballot.virtual_homes.assignment";

/// The slot of each home when `slots` (distinct slot indices) serve homes of `work` trained
/// onto `trained` (`trained[h]` is home h's replica in training; both have one entry per
/// home).
///
/// 1. Homes keep their trained slot where it still serves; the others are orphans.
/// 2. A slot loaded above the cap sheds homes, one at a time: the lightest that covers the
///    excess, else the heaviest below it, while that home is lighter than twice the excess
///    (shedding it lands nearer the cap than keeping it).
/// 3. Orphans and shed homes go, heaviest first, to the least loaded slot.
/// 4. While the most loaded slot is above the cap or the least loaded below the floor, the
///    pair trades: the move of one home, or the swap of two, that brings their loads
///    closest together, if it narrows their difference.
///
/// Loads count each home's work plus one, so homes without work spread too. With target
/// `W / R`, the cap is `target * (1 + BALANCE_SLACK)` and the floor `target * (1 -
/// BALANCE_SLACK)`; no slot ends more than `w_max` (the heaviest home) above the cap.
/// On exactly the trained slots the trained assignment is returned as it is: the table
/// serves what it was trained and measured as. Ties go to the lower home or slot index, so
/// the result does not depend on `slots`' order.
///
/// `slots` must not be empty and `work` and `trained` must have equal lengths.
pub fn rebalance(work: &[u64], trained: &[u16], slots: &[u16]) -> Vec<u16> {
    assert!(!slots.is_empty() && work.len() == trained.len());
    let mut slots = slots.to_vec();
    slots.sort_unstable();
    slots.dedup();
    let mut trained_slots = trained.to_vec();
    trained_slots.sort_unstable();
    trained_slots.dedup();
    if slots == trained_slots {
        return trained.to_vec();
    }
    let weight: Vec<u64> = work.iter().map(|w| w.saturating_add(1)).collect();
    let total: u64 = weight.iter().sum();
    let target = total as f64 / slots.len() as f64;
    let cap = target * (1.0 + BALANCE_SLACK);
    let floor = target * (1.0 - BALANCE_SLACK);

    let index_of = |slot: u16| slots.binary_search(&slot).ok();
    // at[h]: index into `slots` of home h's slot; None while in the pool.
    let mut at: Vec<Option<usize>> = trained.iter().map(|&s| index_of(s)).collect();
    let mut load = vec![0f64; slots.len()];
    for (h, i) in at.iter().enumerate() {
        if let Some(i) = *i {
            load[i] += weight[h] as f64;
        }
    }
    // 2. Shed.
    for (i, slot_load) in load.iter_mut().enumerate() {
        while *slot_load > cap {
            let excess = *slot_load - cap;
            let homes = (0..at.len()).filter(|&h| at[h] == Some(i));
            let Some(h) =
                best_fit(homes, &weight, excess).filter(|&h| excess > weight[h] as f64 / 2.0)
            else {
                break;
            };
            at[h] = None;
            *slot_load -= weight[h] as f64;
        }
    }
    // 3. Place the pool, heaviest first (longest processing time first).
    let mut pool: Vec<usize> = (0..at.len()).filter(|&h| at[h].is_none()).collect();
    pool.sort_by_key(|&h| (std::cmp::Reverse(weight[h]), h));
    for h in pool {
        let i = least_loaded(&load);
        at[h] = Some(i);
        load[i] += weight[h] as f64;
    }
    // 4. Even out the extremes. Every trade lowers the sum of squared loads, so it ends.
    loop {
        let (high, low) = (most_loaded(&load), least_loaded(&load));
        if load[high] <= cap && load[low] >= floor {
            break;
        }
        let on = |i: usize| -> Vec<usize> { (0..at.len()).filter(|&h| at[h] == Some(i)).collect() };
        let (highs, lows) = (on(high), on(low));
        let Some((give, take)) = best_trade(&highs, &lows, &weight, load[high] - load[low]) else {
            break;
        };
        at[give] = Some(low);
        let mut shift = weight[give] as f64;
        if let Some(t) = take {
            at[t] = Some(high);
            shift -= weight[t] as f64;
        }
        load[high] -= shift;
        load[low] += shift;
    }
    at.into_iter()
        .map(|i| slots[i.expect("every home is placed")])
        .collect()
}

/// The work of the homes whose slot differs between assignments `a` and `b`.
pub fn moved_work(a: &[u16], b: &[u16], work: &[u64]) -> u64 {
    a.iter()
        .zip(b)
        .zip(work)
        .filter(|((x, y), _)| x != y)
        .map(|(_, &w)| w)
        .sum()
}

/// The table `table` serves on `replicas` slots (`0..replicas`): `None` for a plain table
/// (it serves only its own count), the compiled table of [`rebalance`]'s assignment for a
/// homes table. Errors if the replica count exceeds the homes or [`MAX_REPLICAS`], or the
/// homes metadata is invalid.
pub fn for_replicas(
    table: &VotingTable,
    replicas: usize,
) -> Result<Option<VotingTable>, MappingError> {
    let slots: Vec<u16> = (0..replicas.min(usize::from(u16::MAX)) as u16).collect();
    for_slots(table, &slots)
}

/// The table `table` serves on the replicas in `slots` (slot indices; a balancer's slots
/// keep their index when a replica leaves, so there may be gaps): `None` for a plain table,
/// for a homes table the compiled table of [`rebalance`]'s assignment, one column per slot
/// up to the highest (a gap gets no votes). Errors as [`for_replicas`].
pub fn for_slots(table: &VotingTable, slots: &[u16]) -> Result<Option<VotingTable>, MappingError> {
    let bad = MappingError;
    let Some(homes) = table.virtual_homes().map_err(|e| bad(e.to_string()))? else {
        return Ok(None);
    };
    compile(table, &homes, slots).map(Some)
}

/// [`for_slots`] with the homes given: `homes.work_for(slots.len())` decides the mapping
/// (the learner measures the work on other counts this way).
pub fn compile(
    table: &VotingTable,
    homes: &VirtualHomes,
    slots: &[u16],
) -> Result<VotingTable, MappingError> {
    let bad = MappingError;
    let width = slots.iter().max().map_or(0, |&s| usize::from(s) + 1);
    let most = homes.homes().min(MAX_REPLICAS);
    if slots.is_empty() || slots.len() > homes.homes() || width > MAX_REPLICAS {
        return Err(bad(format!(
            "a table of {} homes serves 1 to {most} replicas in slots below {MAX_REPLICAS}, \
             not {} replicas up to slot {width}",
            homes.homes(),
            slots.len()
        )));
    }
    let slot_of = rebalance(homes.work_for(slots.len()), &homes.trained, slots);
    compile_assignment(
        table,
        &homes.trained,
        homes.replicas,
        &slot_of,
        width as u16,
    )
    .map_err(|e| bad(e.to_string()))
}

/// The plain table of `table`'s votes with home h voting as slot `slot_of[h]`.
///
/// A term that voted for m of the `trained_replicas` replicas (a hot term, cached where it
/// hits) keeps its spread: it votes for about `m * replicas / trained_replicas` slots. Where
/// its homes cover fewer slots, it adds votes of its mean weight for the slots its term hash
/// ranks first (rendezvous hashing, so a slot added later keeps the earlier choices).
fn compile_assignment(
    table: &VotingTable,
    trained: &[u16],
    trained_replicas: u16,
    slot_of: &[u16],
    replicas: u16,
) -> Result<VotingTable, data::table::TableError> {
    let mut votes: BTreeMap<(&str, u16), f32> = BTreeMap::new();
    // Per term: the trained replicas it votes for, and its weights' sum and count.
    let mut spread: BTreeMap<&str, (u64, f32, u32)> = BTreeMap::new();
    for row in &table.rows {
        let home = usize::from(row.replica);
        let vote = votes
            .entry((row.term.as_str(), slot_of[home]))
            .or_insert(0.0);
        *vote = vote.max(row.weight);
        let s = spread.entry(row.term.as_str()).or_insert((0, 0.0, 0));
        s.0 |= 1 << (trained[home] % 64);
        s.1 += row.weight;
        s.2 += 1;
    }
    for (term, (mask, sum, n)) in spread {
        let m = mask.count_ones();
        if m < 2 {
            continue;
        }
        let wanted = ((f64::from(m) * f64::from(replicas) / f64::from(trained_replicas)).round()
            as usize)
            .min(usize::from(replicas));
        let key = data::hash::term_hash(term);
        let mut ranked: Vec<u16> = (0..replicas).collect();
        ranked.sort_by_key(|&s| std::cmp::Reverse(data::hash::mix64(key ^ u64::from(s))));
        let mut covered = (0..replicas)
            .filter(|&s| votes.contains_key(&(term, s)))
            .count();
        for s in ranked {
            if covered >= wanted {
                break;
            }
            if let std::collections::btree_map::Entry::Vacant(e) = votes.entry((term, s)) {
                e.insert(sum / n as f32);
                covered += 1;
            }
        }
    }
    let rows = votes
        .into_iter()
        .map(|((term, replica), weight)| TableRow::new(term, replica, weight))
        .collect();
    let mut metadata = table.metadata.clone();
    // The compiled table is a plain one: none of the homes' keys stay.
    metadata.retain(|k, _| {
        ![KEY_VHOMES_REPLICAS, KEY_VHOMES_TRAINED, KEY_VHOMES_WORK]
            .iter()
            .any(|p| k.starts_with(p))
    });
    metadata.insert(data::table::KEY_REPLICAS.into(), replicas.to_string());
    let list: Vec<String> = slot_of.iter().map(u16::to_string).collect();
    metadata.insert(KEY_ASSIGNMENT.into(), list.join(","));
    VotingTable::new(replicas, rows, metadata)
}

/// Of `homes`, the lightest weighing at least `gap`, else the heaviest (ties: lower index).
fn best_fit(homes: impl Iterator<Item = usize>, weight: &[u64], gap: f64) -> Option<usize> {
    let mut covering: Option<usize> = None;
    let mut heaviest: Option<usize> = None;
    for h in homes {
        let w = weight[h];
        if w as f64 >= gap {
            if covering.is_none_or(|c| w < weight[c]) {
                covering = Some(h);
            }
        } else if heaviest.is_none_or(|c| w > weight[c]) {
            heaviest = Some(h);
        }
    }
    covering.or(heaviest)
}

/// The trade between a slot holding `high` and one holding `low`, `gap` apart, that leaves
/// them closest: a home of `high` moved, or swapped with a lighter home of `low`. Only
/// trades that shift less than `gap` count (they narrow the difference). Ties: a move
/// before a swap, then the lower home indices.
fn best_trade(
    high: &[usize],
    low: &[usize],
    weight: &[u64],
    gap: f64,
) -> Option<(usize, Option<usize>)> {
    let mut best: Option<(f64, usize, Option<usize>)> = None;
    let mut consider = |shift: f64, give: usize, take: Option<usize>| {
        if shift > 0.0 && shift < gap {
            let left = (gap - 2.0 * shift).abs();
            if best.is_none_or(|(b, _, _)| left < b) {
                best = Some((left, give, take));
            }
        }
    };
    for &g in high {
        consider(weight[g] as f64, g, None);
        for &t in low {
            consider(weight[g] as f64 - weight[t] as f64, g, Some(t));
        }
    }
    best.map(|(_, give, take)| (give, take))
}

fn least_loaded(load: &[f64]) -> usize {
    (0..load.len())
        .min_by(|&a, &b| load[a].total_cmp(&load[b]).then(a.cmp(&b)))
        .expect("slots are not empty")
}

fn most_loaded(load: &[f64]) -> usize {
    (0..load.len())
        .max_by(|&a, &b| load[a].total_cmp(&load[b]).then(b.cmp(&a)))
        .expect("slots are not empty")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn loads(slot_of: &[u16], work: &[u64], slots: usize) -> Vec<u64> {
        let mut load = vec![0; slots];
        for (&s, &w) in slot_of.iter().zip(work) {
            load[usize::from(s)] += w + 1;
        }
        load
    }

    /// `homes_per` homes per replica on `r0` replicas, home h on replica h / homes_per.
    fn trained(r0: u16, homes_per: u16) -> Vec<u16> {
        (0..r0 * homes_per).map(|h| h / homes_per).collect()
    }

    #[test]
    fn growing_uniform_homes_moves_the_consistent_hashing_share_and_shrinking_only_the_orphans() {
        let t = trained(8, 16);
        let work = vec![99u64; t.len()];
        let slots = |r: u16| (0..r).collect::<Vec<_>>();
        let grown = rebalance(&work, &t, &slots(12));
        // Within one home of the mean (1066.7) on every slot, moving no more than consistent
        // hashing's share, 128 * 4/12 = 42.7 homes.
        let load = loads(&grown, &work, 12);
        assert!(load.iter().all(|&l| (1000..=1100).contains(&l)), "{load:?}");
        let moved = moved_work(&t, &grown, &work) / 99;
        assert!((40..=42).contains(&moved), "moved {moved} homes");
        // 8 -> 7: replica 7's 16 homes spread over the others, nothing else moves.
        let shrunk = rebalance(&work, &t, &slots(7));
        assert_eq!(moved_work(&t, &shrunk, &work) / 99, 16);
        assert!(shrunk.iter().all(|&s| s < 7));
        // Back to 8: the trained assignment, whatever came between.
        assert_eq!(rebalance(&work, &t, &slots(8)), t);
    }

    #[test]
    fn a_terms_homes_on_one_slot_vote_once_and_the_compiled_table_names_the_assignment() {
        let mut metadata = BTreeMap::new();
        data::table::VirtualHomes {
            replicas: 2,
            trained: vec![0, 0, 1, 1],
            work: vec![10, 10, 10, 10],
            work_at: Default::default(),
        }
        .insert_into(&mut metadata);
        let rows = vec![
            TableRow::new("a", 0, 1.0),
            TableRow::new("a", 1, 2.0),
            TableRow::new("b", 2, 4.0),
            TableRow::new("c", 3, 8.0),
        ];
        let table = VotingTable::new(4, rows, metadata).unwrap();
        let two = for_replicas(&table, 2).unwrap().unwrap();
        assert_eq!(two.replicas, 2);
        let got: Vec<(&str, u16, f32)> = two
            .rows
            .iter()
            .map(|r| (r.term.as_str(), r.replica, r.weight))
            .collect();
        // "a"'s two homes share slot 0: its list is cached there once, so it votes once,
        // with the heavier weight.
        assert_eq!(got, [("a", 0, 2.0), ("b", 1, 4.0), ("c", 1, 8.0)]);
        assert_eq!(two.metadata[KEY_ASSIGNMENT], "0,0,1,1");
        assert!(two.virtual_homes().unwrap().is_none());
        let four = for_replicas(&table, 4).unwrap().unwrap();
        assert_eq!(four.metadata[KEY_ASSIGNMENT].split(',').count(), 4);
        let e = for_replicas(&table, 5).unwrap_err().to_string();
        assert!(e.contains("serves 1 to 4 replicas"), "{e}");
        // Slots 0 and 3 (1 and 2 left): four columns, the gaps without votes.
        let gapped = for_slots(&table, &[0, 3]).unwrap().unwrap();
        assert_eq!(gapped.replicas, 4);
        assert!(gapped.rows.iter().all(|r| r.replica == 0 || r.replica == 3));
        assert_eq!(gapped.metadata[KEY_ASSIGNMENT], "0,0,3,3");
        let plain = VotingTable::new(2, vec![TableRow::new("a", 0, 1.0)], BTreeMap::new());
        assert!(for_replicas(&plain.unwrap(), 2).unwrap().is_none());
    }

    proptest! {
        #[test]
        fn rebalance_is_balanced_the_identity_on_the_trained_slots_and_order_free(
            r0 in 2u16..12,
            homes_per in 2u16..20,
            seed in any::<u64>(),
            picks in proptest::collection::vec(0u16..40, 1..24),
        ) {
            let t = trained(r0, homes_per);
            let mut x = seed | 1;
            let work: Vec<u64> = t.iter().map(|_| {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                x % 1000
            }).collect();
            prop_assert_eq!(rebalance(&work, &t, &(0..r0).collect::<Vec<_>>()), t.clone());
            let mut slots = picks.clone();
            let got = rebalance(&work, &t, &slots);
            slots.reverse();
            prop_assert_eq!(&rebalance(&work, &t, &slots), &got);
            slots.sort_unstable();
            slots.dedup();
            prop_assert!(got.iter().all(|s| slots.contains(s)));
            prop_assume!(slots != (0..r0).collect::<Vec<_>>());
            let top = usize::from(*slots.last().unwrap()) + 1;
            let load = loads(&got, &work, top);
            let w: Vec<u64> = work.iter().map(|w| w + 1).collect();
            let target = w.iter().sum::<u64>() as f64 / slots.len() as f64;
            let w_max = *w.iter().max().unwrap() as f64;
            let cap = target * (1.0 + BALANCE_SLACK) + w_max + 1e-6;
            for &s in &slots {
                prop_assert!(load[usize::from(s)] as f64 <= cap, "slot {} load {} cap {}", s, load[usize::from(s)], cap);
            }
        }
    }
}

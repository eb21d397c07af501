//! `learner`: learns ballot's voting table from a query log (Archer et al., "Cache-aware
//! load balancing of data center applications", PVLDB 2019).
//!
//! The pipeline, one module per stage:
//! 1. [`aggregate`]: distinct queries with counts and per-term statistics of the train part,
//!    pruning what cannot matter;
//! 2. [`graph`]: the bipartite term–query graph in CSR form with METIS-safe integer weights;
//! 3. [`partition`]: a balanced R-way partition of it with METIS;
//! 4. [`votes`]: the initial voting table from the parts;
//! 5. [`refine`]: simulation-driven refinement: replay through the `table` policy in the
//!    cache simulator, watch where each term was fetched and whether it hit, update;
//! 6. [`train`](mod@train): the whole job with timings and a [`report`];
//!    [`stable`] keeps a served table's homes when it retrains (a movement budget);
//!    [`virtual_homes`] splits each replica into homes so the table serves other counts.

pub mod aggregate;
pub mod graph;
pub mod partition;
pub mod refine;
pub mod report;
pub mod stable;
pub mod train;
pub mod virtual_homes;
pub mod votes;

pub use train::{train, Progress, Stable, TrainConfig, TrainError, TrainOutput};

//! The workspace binaries under test (`ballot`, `replica`, `balancer`), found next to the
//! test executable (`target/<profile>/`) and never older than their sources.
//!
//! Before a test gets a binary, [`bin`] compares its modification time with the newest of
//! the files it is built from: the `*.rs` files and `Cargo.toml` of its package and of every
//! workspace package it depends on (normal and build dependencies, followed transitively
//! through the manifests), the workspace's `Cargo.toml` and `Cargo.lock`; `target/`,
//! `.git/` and other hidden folders, and the `tests/`, `benches/` and `examples/` folders of
//! each package are left out, as are workspace packages the binary does not depend on.
//! (Counting every file of the workspace would rebuild, or fail, after each edit of a test:
//! under `cargo test --workspace` cargo does not relink a binary whose own sources did not
//! change, so it stays older than the test just edited.)
//!
//! A missing binary, or one older than a source, is built with `cargo build --locked
//! [--release] -p PACKAGE --bin NAME` (once per process), and checked again: if a source is
//! still newer and cargo did not report the binary fresh, the test fails naming the binary
//! and the file. A binary that is newer than all its sources is used as it is, with no
//! nested cargo at all: `cargo test --workspace` builds the binaries first, and a nested
//! build with other flags (CI adds `--features` and `--config`) would rebuild everything.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// The package that builds each binary.
const PACKAGES: [(&str, &str); 3] = [
    ("ballot", "pipelines"),
    ("replica", "replica"),
    ("balancer", "balancer-ops"),
];

/// The cargo profile directory the tests were built in (`target/release` or `target/debug`).
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable has a path");
    // target/<profile>/deps/<test>-<hash>
    exe.parent()
        .and_then(Path::parent)
        .expect("the test executable sits in target/<profile>/deps")
        .to_path_buf()
}

/// The workspace root: the parent of this package (`tests/`).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the e2e package sits in the workspace root")
        .to_path_buf()
}

/// The path of the workspace binary `name` (`ballot`, `replica`, `balancer`), built by
/// `cargo build` in the tests' own profile when it is missing or older than a source it is
/// made from (see the module header).
pub fn bin(name: &str) -> PathBuf {
    static READY: Mutex<Option<HashMap<String, PathBuf>>> = Mutex::new(None);
    let mut ready = READY.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(path) = ready.get_or_insert_with(HashMap::new).get(name) {
        return path.clone();
    }
    let package = PACKAGES
        .iter()
        .find(|(b, _)| *b == name)
        .map(|(_, p)| *p)
        .unwrap_or_else(|| panic!("unknown binary {name}"));
    let path = profile_dir().join(name);
    let root = workspace_root();
    let inputs = Inputs::of(&root, package).unwrap_or_else(|e| panic!("{e}"));
    let why = match stale_by(mtime(&path), inputs.newest()) {
        Staleness::Fresh => None,
        Staleness::Missing => Some("missing".to_owned()),
        Staleness::OlderThan(f) => Some(format!("older than {}", f.display())),
    };
    if let Some(why) = why {
        eprintln!("{}: {why}; building it", path.display());
        let fresh = build(&root, package, name, &path);
        if let Err(e) = after_build(&path, mtime(&path), inputs.newest(), fresh) {
            panic!("{e}");
        }
    }
    ready
        .get_or_insert_with(HashMap::new)
        .insert(name.to_owned(), path.clone());
    path
}

/// Runs `cargo build` for binary `name` of `package` into the tests' target directory;
/// returns whether cargo reported the binary fresh (up to date, not rebuilt).
fn build(root: &Path, package: &str, name: &str, path: &Path) -> bool {
    let profile = profile_dir();
    let release = profile.file_name().is_some_and(|p| p == "release");
    let target_dir = profile.parent().expect("target/<profile>");
    let mut cargo = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    cargo
        .current_dir(root)
        .args(["build", "--locked", "-p", package, "--bin", name])
        .args(["--message-format", "json-render-diagnostics"])
        .arg("--target-dir")
        .arg(target_dir);
    if release {
        cargo.arg("--release");
    }
    let out = crate::output_within(&mut cargo, Duration::from_secs(1800), "cargo build");
    assert!(
        out.status.success(),
        "cargo build -p {package} --bin {name} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let artifact = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|m| {
            m["reason"] == "compiler-artifact"
                && m["target"]["name"] == name
                && m["executable"].is_string()
        })
        .unwrap_or_else(|| panic!("cargo build -p {package} reported no binary {name}"));
    let built = PathBuf::from(artifact["executable"].as_str().unwrap_or_default());
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    assert!(
        same(&built, path),
        "cargo built {} but the tests run {}",
        built.display(),
        path.display()
    );
    artifact["fresh"] == true
}

/// The modification time of `path`, `None` when it does not exist.
pub fn mtime(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// How a binary compares with its newest source.
#[derive(Debug, PartialEq, Eq)]
pub enum Staleness {
    /// At least as new as every source.
    Fresh,
    /// Not built.
    Missing,
    /// Older than this source.
    OlderThan(PathBuf),
}

/// Compares a binary's modification time (`None`: missing) with the newest source.
pub fn stale_by(binary: Option<SystemTime>, newest: Option<(PathBuf, SystemTime)>) -> Staleness {
    match (binary, newest) {
        (None, _) => Staleness::Missing,
        (Some(b), Some((file, t))) if t > b => Staleness::OlderThan(file),
        _ => Staleness::Fresh,
    }
}

/// The check after a build: the binary exists and is newer than its sources, or cargo
/// found it up to date (`cargo_fresh`: the newer file is none of its inputs as cargo
/// tracks them, such as a manifest change that does not reach it).
pub fn after_build(
    path: &Path,
    binary: Option<SystemTime>,
    newest: Option<(PathBuf, SystemTime)>,
    cargo_fresh: bool,
) -> Result<(), String> {
    match stale_by(binary, newest) {
        Staleness::Fresh => Ok(()),
        Staleness::Missing => Err(format!("{} missing after cargo build", path.display())),
        Staleness::OlderThan(file) if cargo_fresh => {
            eprintln!(
                "{}: cargo reports it up to date; {} is newer but not one of its inputs",
                path.display(),
                file.display()
            );
            Ok(())
        }
        Staleness::OlderThan(file) => Err(format!(
            "{} is still older than {} after cargo build: the tests would run old code",
            path.display(),
            file.display()
        )),
    }
}

/// The files a package's binaries are built from (see the module header).
#[derive(Debug)]
pub struct Inputs {
    /// Package folders to walk.
    dirs: Vec<PathBuf>,
    /// Folders of workspace packages that are not inputs, inside the walked ones.
    skip: Vec<PathBuf>,
    /// Single files (the workspace's `Cargo.toml` and `Cargo.lock`).
    files: Vec<PathBuf>,
}

/// A workspace member: its folder, name and the names of its workspace dependencies.
struct Member {
    dir: PathBuf,
    name: String,
    deps: Vec<String>,
}

fn read_toml(path: &Path) -> Result<toml::Table, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    text.parse::<toml::Table>()
        .map_err(|e| format!("{}: {e}", path.display()))
}

/// The workspace members' folders listed in the root manifest (`dir/*` expanded).
fn member_dirs(root: &Path, manifest: &toml::Table) -> Result<Vec<PathBuf>, String> {
    let members = manifest
        .get("workspace")
        .and_then(|w| w.get("members"))
        .and_then(|m| m.as_array())
        .ok_or_else(|| {
            format!(
                "{}: no workspace.members",
                root.join("Cargo.toml").display()
            )
        })?;
    let mut dirs = Vec::new();
    for m in members.iter().filter_map(|m| m.as_str()) {
        if let Some(parent) = m.strip_suffix("/*") {
            let read = std::fs::read_dir(root.join(parent)).map_err(|e| format!("{m}: {e}"))?;
            let mut found: Vec<PathBuf> = read
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.join("Cargo.toml").is_file())
                .collect();
            found.sort();
            dirs.extend(found);
        } else {
            dirs.push(root.join(m));
        }
    }
    Ok(dirs)
}

/// The package names a member's dependency tables name (renames resolved through
/// `package = "..."` here or in `[workspace.dependencies]`), and the folders of its path
/// dependencies.
fn dependency_names(
    member: &toml::Table,
    workspace_deps: Option<&toml::Table>,
    dir: &Path,
) -> (Vec<String>, Vec<PathBuf>) {
    let mut tables: Vec<&toml::Table> = Vec::new();
    for key in ["dependencies", "build-dependencies"] {
        if let Some(t) = member.get(key).and_then(|t| t.as_table()) {
            tables.push(t);
        }
    }
    if let Some(targets) = member.get("target").and_then(|t| t.as_table()) {
        for cfg in targets.values().filter_map(|v| v.as_table()) {
            for key in ["dependencies", "build-dependencies"] {
                if let Some(t) = cfg.get(key).and_then(|t| t.as_table()) {
                    tables.push(t);
                }
            }
        }
    }
    let (mut names, mut paths) = (Vec::new(), Vec::new());
    for table in tables {
        for (key, value) in table {
            let mut name = value
                .get("package")
                .and_then(|p| p.as_str())
                .unwrap_or(key)
                .to_owned();
            if let Some(p) = value.get("path").and_then(|p| p.as_str()) {
                paths.push(dir.join(p));
            }
            if value.get("workspace").and_then(|w| w.as_bool()) == Some(true) {
                if let Some(w) = workspace_deps.and_then(|w| w.get(key)) {
                    if let Some(p) = w.get("package").and_then(|p| p.as_str()) {
                        name = p.to_owned();
                    }
                }
            }
            names.push(name);
        }
    }
    (names, paths)
}

impl Inputs {
    /// The inputs of `package`'s binaries in the workspace at `root`.
    pub fn of(root: &Path, package: &str) -> Result<Inputs, String> {
        let manifest = read_toml(&root.join("Cargo.toml"))?;
        let workspace_deps = manifest
            .get("workspace")
            .and_then(|w| w.get("dependencies"))
            .and_then(|d| d.as_table());
        let mut members = Vec::new();
        for dir in member_dirs(root, &manifest)? {
            let m = read_toml(&dir.join("Cargo.toml"))?;
            let name = m
                .get("package")
                .and_then(|p| p.get("name"))
                .and_then(|n| n.as_str())
                .ok_or_else(|| format!("{}: no package.name", dir.join("Cargo.toml").display()))?
                .to_owned();
            let (mut deps, paths) = dependency_names(&m, workspace_deps, &dir);
            deps.extend(paths.into_iter().filter_map(|p| {
                let p = p.canonicalize().ok()?;
                // Resolved below against the members' folders.
                Some(format!("path:{}", p.display()))
            }));
            members.push(Member { dir, name, deps });
        }
        let by_path: HashMap<String, String> = members
            .iter()
            .filter_map(|m| {
                let p = m.dir.canonicalize().ok()?;
                Some((format!("path:{}", p.display()), m.name.clone()))
            })
            .collect();
        let known: BTreeSet<&str> = members.iter().map(|m| m.name.as_str()).collect();
        if !known.contains(package) {
            return Err(format!(
                "{package} is not a member of the workspace at {}",
                root.display()
            ));
        }
        let mut closure: BTreeSet<String> = BTreeSet::new();
        let mut todo = vec![package.to_owned()];
        while let Some(name) = todo.pop() {
            if !closure.insert(name.clone()) {
                continue;
            }
            let m = members.iter().find(|m| m.name == name).expect("a member");
            for d in &m.deps {
                let d = by_path.get(d).unwrap_or(d);
                if known.contains(d.as_str()) && !closure.contains(d) {
                    todo.push(d.clone());
                }
            }
        }
        let dirs: Vec<PathBuf> = members
            .iter()
            .filter(|m| closure.contains(&m.name))
            .map(|m| m.dir.clone())
            .collect();
        let skip = members
            .iter()
            .filter(|m| !closure.contains(&m.name))
            .map(|m| m.dir.clone())
            .collect();
        Ok(Inputs {
            dirs,
            skip,
            files: vec![root.join("Cargo.toml"), root.join("Cargo.lock")],
        })
    }

    /// The newest input and its modification time.
    pub fn newest(&self) -> Option<(PathBuf, SystemTime)> {
        let mut newest: Option<(PathBuf, SystemTime)> = None;
        let mut consider = |p: PathBuf| {
            if let Some(t) = mtime(&p) {
                if newest.as_ref().is_none_or(|(_, n)| t > *n) {
                    newest = Some((p, t));
                }
            }
        };
        for f in &self.files {
            consider(f.clone());
        }
        let mut stack: Vec<PathBuf> = self.dirs.clone();
        while let Some(dir) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in entries.filter_map(Result::ok) {
                let p = e.path();
                let name = e.file_name();
                let name = name.to_string_lossy();
                let Ok(kind) = e.file_type() else { continue };
                if kind.is_dir() {
                    let skipped = name.starts_with('.')
                        || matches!(&*name, "target" | "tests" | "benches" | "examples")
                        || self.skip.contains(&p);
                    if !skipped {
                        stack.push(p);
                    }
                } else if name.ends_with(".rs") || name == "Cargo.toml" {
                    consider(p);
                }
            }
        }
        newest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::{self, File};

    const T0: u64 = 1_700_000_000;

    /// Writes `path` (under `root`) with modification time `T0 + secs`.
    fn put(root: &Path, path: &str, text: &str, secs: u64) -> PathBuf {
        let p = root.join(path);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, text).unwrap();
        touch(&p, secs);
        p
    }

    fn touch(p: &Path, secs: u64) {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(T0 + secs);
        File::options()
            .write(true)
            .open(p)
            .unwrap()
            .set_modified(t)
            .unwrap();
    }

    fn at(secs: u64) -> Option<SystemTime> {
        Some(SystemTime::UNIX_EPOCH + Duration::from_secs(T0 + secs))
    }

    /// A workspace: `app` (the binary's package) depends on `lib` (renamed `core-lib`
    /// through `[workspace.dependencies]`), which depends on `base` by path; `other` and
    /// `lib/extra` (nested in `lib`) are members it does not depend on. Every file is at
    /// T0 + 10.
    fn workspace() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        put(
            r,
            "Cargo.toml",
            "[workspace]\nmembers = [\"app\", \"lib\", \"lib/extra\", \"base\", \"other\", \"tests\"]\n\
             [workspace.dependencies]\nmylib = { path = \"lib\", package = \"core-lib\" }\n",
            10,
        );
        put(r, "Cargo.lock", "", 10);
        put(
            r,
            "app/Cargo.toml",
            "[package]\nname = \"app\"\n[dependencies]\nmylib.workspace = true\nserde = \"1\"\n\
             [dev-dependencies]\nother = { path = \"../other\" }\n",
            10,
        );
        put(r, "app/src/main.rs", "", 10);
        put(
            r,
            "lib/Cargo.toml",
            "[package]\nname = \"core-lib\"\n[target.'cfg(unix)'.dependencies]\nbase = { path = \"../base\" }\n",
            10,
        );
        put(r, "lib/src/lib.rs", "", 10);
        put(
            r,
            "lib/extra/Cargo.toml",
            "[package]\nname = \"extra\"\n",
            10,
        );
        put(r, "lib/extra/src/lib.rs", "", 10);
        put(r, "base/Cargo.toml", "[package]\nname = \"base\"\n", 10);
        put(r, "base/src/lib.rs", "", 10);
        put(r, "base/build.rs", "", 10);
        put(r, "other/Cargo.toml", "[package]\nname = \"other\"\n", 10);
        put(r, "other/src/lib.rs", "", 10);
        put(r, "tests/Cargo.toml", "[package]\nname = \"e2e\"\n", 10);
        put(r, "tests/src/lib.rs", "", 10);
        dir
    }

    #[test]
    fn a_binary_newer_than_its_sources_is_fresh_and_one_older_names_the_newer_source() {
        let ws = workspace();
        let r = ws.path();
        let inputs = Inputs::of(r, "app").unwrap();
        assert_eq!(stale_by(at(20), inputs.newest()), Staleness::Fresh);
        assert_eq!(
            stale_by(at(10), inputs.newest()),
            Staleness::Fresh,
            "same time"
        );
        assert_eq!(stale_by(None, inputs.newest()), Staleness::Missing);
        // A source of a dependency of a dependency, found through a renamed workspace
        // dependency and a target-specific path dependency.
        touch(&r.join("base/src/lib.rs"), 30);
        assert_eq!(
            stale_by(at(20), inputs.newest()),
            Staleness::OlderThan(r.join("base/src/lib.rs"))
        );
        touch(&r.join("base/build.rs"), 40);
        assert_eq!(
            stale_by(at(35), inputs.newest()),
            Staleness::OlderThan(r.join("base/build.rs"))
        );
        // A new source file and a manifest count; so does the lock file.
        let new = put(r, "app/src/new_module.rs", "", 50);
        assert_eq!(stale_by(at(45), inputs.newest()), Staleness::OlderThan(new));
        touch(&r.join("Cargo.lock"), 60);
        assert_eq!(
            stale_by(at(55), inputs.newest()),
            Staleness::OlderThan(r.join("Cargo.lock"))
        );
        touch(&r.join("lib/Cargo.toml"), 70);
        assert_eq!(
            stale_by(at(65), inputs.newest()),
            Staleness::OlderThan(r.join("lib/Cargo.toml"))
        );
    }

    #[test]
    fn files_the_binary_is_not_built_from_never_make_it_stale() {
        let ws = workspace();
        let r = ws.path();
        for (path, why) in [
            ("target/release/build/x/out.rs", "target/"),
            (".git/hooks/x.rs", ".git/"),
            ("app/tests/it.rs", "a package's tests/"),
            ("app/benches/b.rs", "benches/"),
            ("app/examples/e.rs", "examples/"),
            (
                "other/src/lib.rs",
                "a member it does not depend on (a dev-dependency only)",
            ),
            (
                "lib/extra/src/lib.rs",
                "a member nested in a dependency's folder",
            ),
            ("tests/src/lib.rs", "the test-support package"),
            ("app/src/notes.txt", "not a source"),
        ] {
            put(r, path, "", 100);
            let inputs = Inputs::of(r, "app").unwrap();
            assert_eq!(stale_by(at(20), inputs.newest()), Staleness::Fresh, "{why}");
        }
        assert!(Inputs::of(r, "nope").is_err());
    }

    #[test]
    fn this_workspace_resolves_each_binary_to_its_own_packages() {
        let root = workspace_root();
        let replica = Inputs::of(&root, "replica").unwrap();
        assert!(replica.dirs.contains(&root.join("replica")), "{replica:?}");
        assert!(replica.dirs.contains(&root.join("data")), "{replica:?}");
        assert!(
            !replica.dirs.contains(&root.join("pipelines")),
            "{replica:?}"
        );
        assert!(!replica.dirs.contains(&root.join("tests")), "{replica:?}");
        let balancer = Inputs::of(&root, "balancer-ops").unwrap();
        for dep in ["balancer/ops", "balancer/server", "balancer/routes"] {
            assert!(
                balancer.dirs.contains(&root.join(dep)),
                "{dep}: {balancer:?}"
            );
        }
        assert!(
            balancer.dirs.contains(&root.join("balancer")),
            "{balancer:?}"
        );
        let ballot = Inputs::of(&root, "pipelines").unwrap();
        for dep in ["replica", "balancer/ops", "balancer/server", "learner"] {
            assert!(ballot.dirs.contains(&root.join(dep)), "{dep}: {ballot:?}");
        }
        assert!(ballot.newest().is_some());
    }

    #[test]
    fn after_a_build_a_binary_still_older_fails_unless_cargo_found_it_up_to_date() {
        let bin = Path::new("target/release/app");
        let newest = || Some((PathBuf::from("lib/src/lib.rs"), at(30).unwrap()));
        assert_eq!(after_build(bin, at(40), newest(), false), Ok(()));
        let err = after_build(bin, at(20), newest(), false).unwrap_err();
        assert!(
            err.contains("target/release/app") && err.contains("lib/src/lib.rs"),
            "{err}"
        );
        assert_eq!(after_build(bin, at(20), newest(), true), Ok(()));
        let err = after_build(bin, None, newest(), true).unwrap_err();
        assert!(err.contains("missing"), "{err}");
    }
}

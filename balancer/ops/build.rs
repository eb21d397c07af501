//! Sets the `ballot_clients` cfg when `BALLOT_CLIENTS` is set, so that the test driving the
//! official search clients (it needs python3, node and the package registries) is reported
//! as ignored, with how to run it, when it is not (rather than passing without checking).

fn main() {
    println!("cargo::rerun-if-env-changed=BALLOT_CLIENTS");
    println!("cargo::rustc-check-cfg=cfg(ballot_clients)");
    if std::env::var_os("BALLOT_CLIENTS").is_some() {
        println!("cargo::rustc-cfg=ballot_clients");
    }
}

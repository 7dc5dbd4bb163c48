//! Prints the goodput-versus-loss table of the simulation (deterministic:
//! same seed, same table). `cargo run --release -p uroce-transport --example goodput [SEED]`

fn main() {
    let seed = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    print!("{}", uroce_transport::sim::goodput::table(seed));
}

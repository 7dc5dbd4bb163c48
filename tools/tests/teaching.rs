//! docs/TEACHING.md's scenarios: every command on the page runs (on loopback
//! addresses of the test's own) and its ladder shows what the page says it
//! shows (the `<!-- expects: ... -->` line under the command).

mod common;

use common::uroce;
use std::path::PathBuf;
use uroce_verbs::TestNet;

/// (command, expected texts) of each scenario, in page order.
fn scenarios() -> Vec<(String, Vec<String>)> {
    let page = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/TEACHING.md");
    let text = std::fs::read_to_string(page).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(expects) = line.strip_prefix("<!-- expects: ").and_then(|l| l.strip_suffix(" -->")) else { continue };
        // The command: the line before the ``` that closes the sh block.
        assert_eq!(lines[i - 1], "```", "an expects line follows its command's block");
        let command = lines[i - 2].to_string();
        assert!(command.starts_with("uroce ") && command.contains("--ladder"), "{command}");
        found.push((command, expects.split(" | ").map(str::to_string).collect()));
    }
    found
}

/// `text` with the ladder's lines and runs of spaces squeezed out, so that
/// a note wrapped over lines reads as one.
fn squeezed(text: &str) -> String {
    text.replace('|', " ").split_whitespace().collect::<Vec<_>>().join(" ")
}

#[test]
fn every_scenario_shows_what_the_page_says() {
    let scenarios = scenarios();
    assert_eq!(scenarios.len(), 8, "the page's eight scenarios");
    let net = TestNet::new();
    for (command, expects) in scenarios {
        // A scenario can depend on timing (section 4's RNR NAK needs the
        // SENDs to arrive before the server re-posts its receive, which a
        // busy machine may not give): up to three runs, each miss said.
        let mut missed = String::new();
        for attempt in 1..=3 {
            missed = missing(&net, &command, &expects);
            if missed.is_empty() {
                break;
            }
            println!("{command}, run {attempt} of 3: {missed}");
        }
        assert!(missed.is_empty(), "{missed}");
    }
}

/// What the ladder of one run of `command` lacks of `expects`, with the
/// ladder; empty if it shows all of it. A failed run fails the test.
fn missing(net: &TestNet, command: &str, expects: &[String]) -> String {
    let mut args: Vec<&str> = command.split_whitespace().skip(1).collect();
    let dev = net.udp(1);
    args.extend(["-d", &dev]);
    let out = uroce().args(&args).env("COLUMNS", "100").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{command}: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
    let ladder = squeezed(&stdout);
    match expects.iter().find(|e| !ladder.contains(&squeezed(e))) {
        Some(e) => format!("no {e:?} in its ladder:\n{stdout}"),
        None => String::new(),
    }
}

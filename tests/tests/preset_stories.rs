//! Every adapter preset has a story that reads it end to end with the
//! value its data implies: the inference servers' and the GPU presets in
//! `adapter.rs` (`STORIES`, against Prometheus, with either metadata
//! source) and again in `victoriametrics.rs` (the same stories against
//! VictoriaMetrics), the request holders' in `holder_presets.rs`. A new
//! preset without its stories fails here, naming the file to add them to.

use std::collections::BTreeSet;

use gpuscale_adapter::presets::NAMES;

fn presets(stories: &[(&'static str, &str, &str)]) -> BTreeSet<&'static str> {
    stories.iter().map(|s| s.0).collect()
}

#[test]
fn every_preset_has_a_story_in_each_suite_that_reads_its_kind() {
    let servers = presets(crate::adapter::STORIES);
    let holders = presets(crate::holder_presets::STORIES);
    let victoria = presets(crate::victoriametrics::STORIES);
    for name in NAMES {
        assert!(
            servers.contains(name) || holders.contains(name),
            "preset {name} has no story: add one to STORIES in tests/tests/adapter.rs \
             (a server's or GPU series) or tests/tests/holder_presets.rs (a request holder's)"
        );
        if servers.contains(name) {
            assert!(
                victoria.contains(name),
                "preset {name} has no story against VictoriaMetrics: add one of \
                 tests/tests/adapter.rs's to STORIES in tests/tests/victoriametrics.rs"
            );
        }
    }
    let known: BTreeSet<&str> = NAMES.iter().copied().collect();
    for story in servers.union(&holders) {
        assert!(
            known.contains(story),
            "a story of {story}, which is no preset"
        );
    }
}

#[test]
fn the_victoriametrics_stories_are_copies_of_the_prometheus_ones() {
    for story in crate::victoriametrics::STORIES {
        assert!(
            crate::adapter::STORIES.contains(story),
            "{story:?} in tests/tests/victoriametrics.rs is not one of tests/tests/adapter.rs's \
             STORIES: the same data must read the same value on either engine"
        );
    }
}

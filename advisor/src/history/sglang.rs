//! SGLang's KV pool: `sglang:max_total_num_tokens` (the tokens its KV
//! cache pool holds) marks a workload as SGLang's. Its pool use
//! (`sglang:token_usage`), retractions and queue are read with vLLM's in
//! `serving.rs`. SGLang publishes no `--mem-fraction-static`: `vllm.rs`
//! takes its reservation from its peak (docs/right-sizing.md, "vLLM and
//! SGLang").

use super::{History, KEY, Key, Kv, Window};
use crate::Error;
use crate::prom::Prometheus;

impl History {
    pub(super) fn read_sglang(&mut self, p: &Prometheus, w: &Window) -> Result<(), Error> {
        let r = &w.range;
        let q = format!(
            "max by ({KEY}) (max by (cluster, namespace, pod) (last_over_time(sglang:max_total_num_tokens[{r}])) \
             * on (cluster, namespace, pod) group_left (workload_kind, workload) \
             max by (cluster, namespace, pod, workload_kind, workload) (max_over_time(gpu_pod_info[{r}])))"
        );
        for s in p.query(&q)? {
            let Some(f) = self.workloads.get_mut(&Key::of(&s)) else {
                continue;
            };
            let kv = f.kv.get_or_insert_with(Kv::default);
            kv.sglang = true;
            kv.pool_tokens = (s.value.is_finite() && s.value > 0.0).then_some(s.value);
        }
        Ok(())
    }
}

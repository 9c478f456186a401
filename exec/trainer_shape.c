/* The shapes of this rank's shard and the memory tally (see trainer_shape.h). */
#include <stdlib.h>

#include "exec/trainer_shape.h"

/* Layers of this stage: the global layers of every chunk it runs, in ascending order. */
static ts_status stage_layers(tr_shape *s, const ts_stage_program *sp) {
    int L = s->m->layers;
    s->global_of = calloc((size_t)L, sizeof *s->global_of);
    s->local_of = malloc((size_t)L * sizeof *s->local_of);
    s->chunk_of = calloc((size_t)L, sizeof *s->chunk_of);
    if (!s->global_of || !s->local_of || !s->chunk_of) return TS_FAIL(TS_ERR_NOMEM, "out of memory for the stage's layers");
    for (int j = 0; j < L; j++) s->local_of[j] = -1;
    for (int i = 0; i < sp->n_ops; i++) {
        int j = sp->ops[i].layer;
        if (j >= 0 && j < L && s->local_of[j] < 0) s->local_of[j] = 0;
    }
    for (int j = 0; j < L; j++)
        if (s->local_of[j] == 0) {
            s->local_of[j] = s->n_local;
            s->global_of[s->n_local++] = j;
        }
    for (int i = 0; i < sp->n_ops; i++) {
        int j = sp->ops[i].layer;
        if (j >= 0 && j < L && sp->ops[i].phase == TS_PHASE_FWD) s->chunk_of[s->local_of[j]] = sp->ops[i].chunk;
    }
    return TS_OK;
}

ts_status tr_shape_init(tr_shape *s, const ts_problem *pb, const ts_layout *l, const ts_runtime *rt,
                        const ts_stage_program *sp) {
    const ts_model *m = &pb->model;
    *s = (tr_shape){.m = m, .l = l};
    s->stage = rt->coords.pp;
    s->tp_i = rt->coords.tp;
    s->cp_i = rt->coords.cp;
    s->dp_i = rt->coords.dp;
    s->ep_i = ts_comm_rank(rt->comm[TS_GROUP_EP]);
    s->etp = ts_layout_etp(l);
    s->etp_i = ts_comm_rank(rt->comm[TS_GROUP_ETP]);
    s->C = (int)m->hidden;
    s->V = (int)m->vocab;
    s->Vr = s->V / l->tp;
    s->v0 = s->tp_i * s->Vr;
    s->H = m->heads;
    s->KV = m->kv_heads;
    s->D = m->head_dim;
    s->Hr = s->H / l->tp;
    s->KVr = s->KV / l->tp;
    s->Qr = s->Hr * s->D;
    s->KVD = s->KVr * s->D;
    s->QKVr = s->Qr + 2 * s->KVD;
    s->F = (int)m->ffn_hidden;
    s->Fr = s->F / l->tp;
    s->E = m->moe.experts;
    s->El = s->E ? s->E / l->ep : 0;
    s->e0 = s->ep_i * s->El;
    s->K = s->E ? m->moe.top_k : 0;
    s->G = m->moe.router_groups;
    s->M = m->moe.router_group_topk;
    s->Fe = (int)m->moe.expert_ffn;
    s->Fer = s->E ? s->Fe / s->etp : 0;
    s->seq = (int)pb->train.seq;
    s->cp = l->cp;
    s->Ts = s->seq / l->cp;
    s->mbs = l->mbs;
    s->B = (int)pb->train.global_batch;
    s->T = s->mbs * s->Ts;
    s->Tl = l->sp ? s->T / l->tp : s->T;
    s->Tm = tr_shape_experts_apart(s) ? s->Tl : s->T;
    s->m_mb = l->microbatches;
    return stage_layers(s, sp);
}

void tr_shape_free(tr_shape *s) {
    free(s->global_of);
    free(s->local_of);
    free(s->chunk_of);
    s->global_of = s->local_of = s->chunk_of = NULL;
}

void tr_shape_dims(const tr_shape *s, ts_exec_dims *out) {
    *out = (ts_exec_dims){.T = (size_t)s->T, .Tl = (size_t)s->Tl, .Tm = (size_t)s->Tm, .C = (size_t)s->C,
                          .QKVr = (size_t)s->QKVr,
                          .Qr = (size_t)s->Qr, .Hr = (size_t)s->Hr, .Fr = (size_t)s->Fr, .Fer = (size_t)s->Fer,
                          .Vr = (size_t)s->Vr, .E = (size_t)s->E, .K = (size_t)s->K, .El = (size_t)s->El,
                          .ep = (size_t)s->l->ep};
}

int tr_shape_is_moe(const tr_shape *s, int global) { return ts_model_layer_is_moe(s->m, global); }

int tr_shape_experts_apart(const tr_shape *s) { return s->etp < s->l->tp; }

int tr_shape_mlp_tp(const tr_shape *s, int global) {
    return !tr_shape_is_moe(s, global) || !tr_shape_experts_apart(s);
}

void tr_tally_add(tr_tally *t, tr_mem mem, double bytes) {
    t->live[mem] += bytes;
    if (t->live[mem] > t->peak[mem]) t->peak[mem] = t->live[mem];
}

ts_status tr_alloc_floats(const ts_backend *be, tr_tally *t, tr_mem mem, size_t n, float **out) {
    void *p;
    TS_CHECK(be->alloc(n * sizeof(float), &p));
    *out = p;
    tr_tally_add(t, mem, (double)n * sizeof(float));
    return TS_OK;
}

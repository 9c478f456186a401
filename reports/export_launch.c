/* Launch scripts for the Megatron-LM arguments (see export.h).
 *
 * torchrun (PyTorch's elastic launcher; torch.distributed.run): --nnodes, --nproc-per-node,
 * --node-rank, --master-addr, --master-port start one process per GPU of a node. The Slurm form
 * runs that torchrun once per node with srun (--ntasks-per-node=1), the node rank from
 * SLURM_NODEID and the master from the first host of SLURM_JOB_NODELIST (scontrol show
 * hostnames), the pattern of Megatron-LM's own examples/ scripts. The script's extra arguments
 * ("$@") are appended to the flags: data, tokenizer, optimizer, checkpoints. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/export.h"

typedef struct {
    const ts_problem *pb;
    const ts_layout *l;
    const ts_export_opts *o;
    ts_launch_kind kind;
    const char *flags; /* the Megatron flags line, '\n'-terminated */
    const char *notes; /* the '#' lines before it */
} launch_args;

static void write_env(FILE *f, const ts_layout *l) {
    if (ts_export_needs_max_connections_1(l))
        fputs("# Megatron-LM requires one CUDA connection with tp > 1 or cp > 1 (GPUs before Blackwell)\n"
              "export CUDA_DEVICE_MAX_CONNECTIONS=1\n", f);
    else if (l->zero >= 2)
        fputs("# Megatron-FSDP refuses CUDA_DEVICE_MAX_CONNECTIONS=1\nunset CUDA_DEVICE_MAX_CONNECTIONS\n", f);
    fputs("export NCCL_IB_SL=${NCCL_IB_SL:-1}\n", f);
}

static ts_status write_launch(FILE *f, const void *arg) {
    const launch_args *a = arg;
    const ts_problem *pb = a->pb;
    int per_node = pb->sys.gpus_per_node > 0 ? pb->sys.gpus_per_node : 1;
    int gpus_here = pb->gpus < per_node ? pb->gpus : per_node;
    int nodes = (pb->gpus + per_node - 1) / per_node;
    fputs("#!/usr/bin/env bash\n", f);
    if (a->kind == TS_LAUNCH_SBATCH) {
        fprintf(f, "#SBATCH --job-name=tessera-%s\n#SBATCH --nodes=%d\n#SBATCH --ntasks-per-node=1\n"
                   "#SBATCH --gpus-per-node=%d\n#SBATCH --exclusive\n", pb->model.name, nodes, gpus_here);
    }
    fputs(a->notes, f);
    fprintf(f, "# %d GPUs = %d node%s x %d GPUs; extra arguments go to pretrain_gpt.py (data, tokenizer, optimizer)\n",
            pb->gpus, nodes, nodes == 1 ? "" : "s", gpus_here);
    fputs("set -euo pipefail\n", f);
    write_env(f, a->l);
    fputs("MEGATRON_LM=${MEGATRON_LM:?set MEGATRON_LM to a Megatron-LM checkout}\n", f);
    fprintf(f, "NNODES=%d\nGPUS_PER_NODE=%d\nMASTER_PORT=${MASTER_PORT:-6000}\n", nodes, gpus_here);
    fputs("ARGS=(\n    ", f);
    fputs(a->flags, f);
    fputs(")\n", f);
    if (a->kind == TS_LAUNCH_SBATCH) {
        fputs("MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" | head -n 1)\n"
              "srun --ntasks-per-node=1 bash -c \"torchrun --nnodes $NNODES --nproc-per-node $GPUS_PER_NODE "
              "--node-rank \\$SLURM_NODEID --master-addr $MASTER_ADDR --master-port $MASTER_PORT "
              "$MEGATRON_LM/pretrain_gpt.py ${ARGS[*]@Q} ${*@Q}\"\n", f);
    } else {
        fputs("NODE_RANK=${NODE_RANK:-0}\nMASTER_ADDR=${MASTER_ADDR:-localhost}\n"
              "exec torchrun --nnodes \"$NNODES\" --nproc-per-node \"$GPUS_PER_NODE\" --node-rank \"$NODE_RANK\" "
              "--master-addr \"$MASTER_ADDR\" --master-port \"$MASTER_PORT\" \\\n"
              "    \"$MEGATRON_LM/pretrain_gpt.py\" \"${ARGS[@]}\" \"$@\"\n", f);
    }
    return TS_OK;
}

ts_status ts_export_launch(const ts_problem *pb, const ts_layout *l, const ts_export_opts *o, ts_launch_kind kind,
                           char **out) {
    *out = NULL;
    char *text = NULL;
    TS_CHECK(ts_export_megatron(pb, l, o, &text));
    /* Split the comments from the flags line, the last line. */
    size_t len = strlen(text);
    size_t start = len > 1 ? len - 2 : 0;
    while (start > 0 && text[start] != '\n') start--;
    if (text[start] == '\n') start++;
    char *flags_copy = strdup(text + start);
    text[start] = '\0';
    if (flags_copy == NULL) {
        free(text);
        return TS_FAIL(TS_ERR_NOMEM, "out of memory writing a launch script");
    }
    launch_args a = {pb, l, o, kind, flags_copy, text};
    ts_status st = ts_export_to_string(out, "a launch script", write_launch, &a);
    free(flags_copy);
    free(text);
    return st;
}

/* bfloat16 as a storage type: the upper 16 bits of an IEEE-754 binary32 (1 sign, 8 exponent,
 * 7 mantissa bits; Kalamkar et al. 2019, "A Study of BFLOAT16 for Deep Learning Training"), the
 * word the GPU's bf16 GEMMs and tensor cores read. Conversion from fp32 rounds to nearest, ties to
 * even, as CUDA's __float2bfloat16_rn does; NaNs stay NaNs (quiet), infinities stay infinities,
 * and a finite value past bf16's largest (3.3895e38) rounds to infinity, as in IEEE rounding.
 * Back to fp32 is exact (zero low bits).
 *
 * Header-only and TS_HOST_DEVICE, so the CPU reference (exec/kernels_bf16.c) and the CUDA kernels
 * round at the same points with the same rule. */
#ifndef TS_BF16_H
#define TS_BF16_H

#include <stdint.h>
#include <string.h>

#include "common/host_device.h"

typedef struct {
    uint16_t bits;
} ts_bf16;

/* bf16 has 8 significant bits (7 stored): a rounding's relative error is at most 2^-8. */
#define TS_BF16_UNIT_ROUNDOFF 0.00390625

static inline TS_HOST_DEVICE uint32_t ts_bf16_f32_bits_(float x) {
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static inline TS_HOST_DEVICE ts_bf16 ts_bf16_from_float(float x) {
    uint32_t u = ts_bf16_f32_bits_(x);
    ts_bf16 b;
    if ((u & 0x7F800000u) == 0x7F800000u && (u & 0x007FFFFFu) != 0) {
        b.bits = (uint16_t)((u >> 16) | 0x0040u); /* NaN: keep the sign, force a quiet payload */
        return b;
    }
    /* Adding 0x7FFF plus the kept word's lowest bit carries into it exactly when the dropped half
     * is above one half, or equal to it with the kept word odd: round to nearest, ties to even. */
    b.bits = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
    return b;
}

static inline TS_HOST_DEVICE float ts_bf16_to_float(ts_bf16 b) {
    uint32_t u = (uint32_t)b.bits << 16;
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* x rounded to the nearest bf16, as an fp32: what a value is after a trip through bf16 memory. */
static inline TS_HOST_DEVICE float ts_bf16_round(float x) { return ts_bf16_to_float(ts_bf16_from_float(x)); }

#endif

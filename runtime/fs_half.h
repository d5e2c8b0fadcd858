/*
** fs_half.h: bf16 and IEEE fp16 conversions on the host (exact decode,
** round-to-nearest-even encode).  Used by the CPU reference, tests and tools.
*/
#ifndef FS_HALF_H
#define FS_HALF_H

#include <stdint.h>
#include <string.h>

static inline float fs_bf16_to_float(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline uint16_t fs_float_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

static inline float fs_half_to_float(uint16_t h) {
  uint32_t s = (uint32_t)(h & 0x8000u) << 16, e = (h >> 10) & 0x1fu,
           m = h & 0x3ffu, u;
  if (e == 0) {
    if (m == 0) {
      u = s;
    } else { /* subnormal: renormalise */
      e = 113;
      while (!(m & 0x400u)) { m <<= 1; e--; }
      u = s | (e << 23) | ((m & 0x3ffu) << 13);
    }
  } else if (e == 31) {
    u = s | 0x7f800000u | (m << 13);
  } else {
    u = s | ((e + 112) << 23) | (m << 13);
  }
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static inline uint16_t fs_float_to_half(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  uint32_t s = (u >> 16) & 0x8000u, a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return (uint16_t)(s | 0x7e00u);
  if (a >= 0x477ff000u) return (uint16_t)(s | 0x7c00u); /* overflow -> inf */
  if (a < 0x38800000u) {                                  /* subnormal */
    if (a < 0x33000000u) return (uint16_t)s;
    uint32_t e = a >> 23, m = (a & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e; /* 14..24 */
    uint32_t r = m >> shift, rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1))) r++;
    return (uint16_t)(s | r);
  }
  uint32_t r = a - 0x38000000u; /* rebias exponent 127 -> 15 */
  uint32_t m = r >> 13, rem = r & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (m & 1))) m++;
  return (uint16_t)(s | m);
}

#endif

/* Trimmed from NVIDIA/open-gpu-kernel-modules 535.261.03 src/common/sdk/nvidia/inc/class/cl0041.h
 * Copyright (c) NVIDIA CORPORATION & AFFILIATES
 * SPDX-License-Identifier: MIT */
#define  NV04_MEMORY                                               (0x00000041)

/* Trimmed from NVIDIA/open-gpu-kernel-modules 580.142 src/common/sdk/nvidia/inc/class/cl0041.h
 * Copyright (c) NVIDIA CORPORATION & AFFILIATES
 * SPDX-License-Identifier: MIT */
#define  NV04_MEMORY                                               (0x00000041)

/* Trimmed from NVIDIA/open-gpu-kernel-modules 535.261.03 src/nvidia/generated/g_allclasses.h
 * SPDX-FileCopyrightText: Copyright (c) 2021-2021 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
 * SPDX-License-Identifier: MIT */
#define NV01_ROOT                                (0x00000000)
#define NV1_ROOT                                 (0x00000000) // alias
#define NV01_NULL_OBJECT                         (0x00000000) // alias
#define NV1_NULL_OBJECT                          (0x00000000) // alias
#define NV01_ROOT_CLIENT                         (0x00000041)

/* Trimmed from NVIDIA/open-gpu-kernel-modules 580.142 src/common/sdk/nvidia/inc/class/cl0000.h
 * SPDX-FileCopyrightText: Copyright (c) 2001-2024 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
 * SPDX-License-Identifier: MIT */
/* object NV01_NULL_OBJECT */
#define NV01_NULL_OBJECT (0x0) /* finn: Evaluated from "NV0000_ALLOC_PARAMETERS_MESSAGE_ID" */

/* obsolete alises */
#define NV1_NULL_OBJECT  NV01_NULL_OBJECT

#define NV01_ROOT        (0x0U) /* finn: Evaluated from "NV0000_ALLOC_PARAMETERS_MESSAGE_ID" */

/* NvAlloc parameteters */
#define NV0000_ALLOC_PARAMETERS_MESSAGE_ID (0x0000U)

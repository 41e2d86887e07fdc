/* Trimmed from NVIDIA/open-gpu-kernel-modules 535.261.03 src/common/sdk/nvidia/inc/ctrl/ctrlc56f.h
 * SPDX-FileCopyrightText: Copyright (c) 2018-2022 NVIDIA CORPORATION & AFFILIATES. All rights reserved.
 * SPDX-License-Identifier: MIT */
#define NVC56F_CTRL_CMD_NULL (NVC36F_CTRL_CMD_NULL)

#define NVC56F_CTRL_GET_CLASS_ENGINEID (NVC36F_CTRL_GET_CLASS_ENGINEID)

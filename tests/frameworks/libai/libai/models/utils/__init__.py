# coding=utf-8
# Copyright 2021 The OneFlow Authors. All rights reserved.
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

from .graph_base import GraphBase
from .weight_init import init_method_normal, scaled_init_method_normal
from .model_loader.base_loader import ModelLoaderHuggerFace, ModelLoaderLiBai
from .model_loader.bert_loader import BertLoaderHuggerFace, BertLoaderLiBai
from .model_loader.roberta_loader import RobertaLoaderHuggerFace, RobertaLoaderLiBai
from .model_loader.gpt_loader import GPT2LoaderHuggerFace, GPT2LoaderLiBai
from .model_loader.swin_loader import SwinLoaderHuggerFace, SwinLoaderLiBai
from .model_loader.swinv2_loader import SwinV2LoaderHuggerFace, SwinV2LoaderLiBai
from .model_loader.vit_loader import ViTLoaderHuggerFace, ViTLoaderLiBai

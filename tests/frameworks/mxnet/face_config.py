"""A stand-in for ArcFace MXNet's ``config.py`` (``cp sample_config.py config.py`` in deepinsight/insightface
recognition/ArcFace), for the real-cluster test of ``mxnet/insightface`` (tests/test_insightface_slurm.py): the names
the suite and train.py use (``config.max_steps``, ``dataset.emore.num_classes``, ``default.kvstore`` = 'device',
``default.per_batch_size``, ``default.frequent``, ``default.models_root`` ...) with sample_config.py's defaults, and
its ``generate_config`` (settings copied into ``config``; ``config.num_workers`` from ``DMLC_NUM_WORKER``).
Attribute dicts as easydict gives them (easydict is not in the test venv)."""

import os


class edict(dict):  # noqa: N801  (easydict's name)
    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None

    def __setattr__(self, name, value):
        self[name] = value


config = edict()
config.emb_size = 16
config.max_steps = 0
config.image_shape = (112, 112, 3)

network = edict()
network.r100 = edict(net_name="fresnet", num_layers=100)
network.y1 = edict(net_name="fmobilefacenet", emb_size=16)

dataset = edict()
dataset.emore = edict(dataset="emore", dataset_path="../datasets/faces_emore", num_classes=85742,
                      image_shape=(112, 112, 3))

loss = edict()
loss.arcface = edict(loss_name="margin_softmax", loss_s=64.0, loss_m1=1.0, loss_m2=0.5, loss_m3=0.0)

default = edict()
default.network = "r100"
default.dataset = "emore"
default.loss = "arcface"
default.frequent = 20
default.verbose = 2000
default.kvstore = "device"
default.lr = 0.1
default.wd = 0.0005
default.mom = 0.9
default.per_batch_size = 128
default.models_root = "./models"


def generate_config(_network, _dataset, _loss):
    for k, v in loss[_loss].items():
        config[k] = v
    for k, v in network[_network].items():
        config[k] = v
    for k, v in dataset[_dataset].items():
        config[k] = v
    config.loss, config.network, config.dataset = _loss, _network, _dataset
    config.num_workers = 1
    if "DMLC_NUM_WORKER" in os.environ:
        config.num_workers = int(os.environ["DMLC_NUM_WORKER"])

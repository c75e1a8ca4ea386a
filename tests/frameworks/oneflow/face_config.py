"""A stand-in for oneflow_face's ``sample_config.py`` (the module ``insightface_train.py`` imports as its config), for
the real-cluster test of ``oneflow/insightface`` (tests/test_insightface_slurm.py): the same names the suite and the
program use (``dataset.emore.num_classes``, ``dataset.emore.train_data_part_num``, ``default.node_ips``,
``default.num_nodes``, ``default.device_num_per_node``, ``default.models_root`` ...) with sample_config.py's defaults,
and its ``generate_config`` (the dataset's, network's and loss's settings copied into ``config``). Attribute dicts as
easydict gives them (easydict is not in the test venv)."""


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
config.data_format = "NCHW"

network = edict()
network.r100 = edict(net_name="fresnet", num_layers=100)
network.y1 = edict(net_name="fmobilefacenet", emb_size=16)

dataset = edict()
dataset.emore = edict(dataset_name="face_emore", num_classes=85744, total_img_num=5822653,
                      train_data_part_num=16, image_shape=(112, 112, 3))

loss = edict()
loss.arcface = edict(loss_name="margin_softmax", loss_s=64.0, loss_m1=1.0, loss_m2=0.5, loss_m3=0.0)

default = edict()
default.dataset = "emore"
default.network = "r100"
default.loss = "arcface"
default.node_ips = ["192.168.1.13"]
default.num_nodes = 1
default.device_num_per_node = 8
default.model_parallel = 0
default.partial_fc = 0
default.train_unit = "batch"
default.train_iter = 170586
default.models_root = "./models"
default.log_dir = "output/log"
default.loss_print_frequency = 1
default.iter_num_in_snapshot = 5000
default.use_fp16 = False
default.use_synthetic_data = False
default.validation_interval = 5000
default.sample_ratio = 0.1


def generate_config(_network, _dataset, _loss):
    for k, v in loss[_loss].items():
        config[k] = v
    for k, v in network[_network].items():
        config[k] = v
    for k, v in dataset[_dataset].items():
        config[k] = v
    config.network, config.dataset, config.loss = _network, _dataset, _loss

from torch.utils.data.dataloader import DataLoader, IterableDataset, get_worker_info

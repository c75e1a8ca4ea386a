"""Real credential variable names and value shapes, and where a campaign's files and output hold any of them.

The names are the ones real tools read (MySQL's client, libpq-style URLs, GitLab, Slack, MLflow, GitLab CI's job
JWT, sshpass, AWS, GitHub, Hugging Face, Weights & Biases, proxies); the values have the shapes those services
issue (every one is made up here). Several sit under a name the environment allow-list keeps (NCCL_*, TORCH_*,
HOROVOD_*, UCX_*, the proxies, PATH): their values must be masked all the same."""

from __future__ import annotations

from pathlib import Path

JWT = ("eyJhbGciOiJSUzI1NiIsInR5cCI6IkpXVCJ9.eyJuYW1lc3BhY2VfaWQiOiI0MiIsInVzZXJfbG9naW4iOiJhbGljZSJ9."
       "Qm9ndXNTaWduYXR1cmVPZkFUZXN0Snd0VGhhdElzTG9uZ0Vub3VnaA")
#: (name, value, the secret part a file must never hold, its shape)
CREDENTIALS: tuple[tuple[str, str, str, str], ...] = (
    ("MYSQL_PWD", "Xk9pQ2mZr7Lw", "Xk9pQ2mZr7Lw", "plain password"),
    ("DATABASE_URL", "postgres://benchuser:Pg5ecretPw@db.example.org:5432/bench", "Pg5ecretPw", "URL userinfo"),
    ("GITLAB_PAT", "glpat-Ab3dEf9hIj2lMn5pQr8s", "glpat-Ab3dEf9hIj2lMn5pQr8s", "GitLab PAT"),
    ("S3_CREDS", "AKIAIOSFODNN7EXAMPL3:wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYzEXAMPLE",
     "AWS key id:secret"),
    ("SLACK_WEBHOOK_URL", "https://hooks.slack.com/services/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",
     "q8Jx2Lm4Np6Rt8Vz0Bd2Fh4K", "webhook URL (secret in path)"),
    ("HTTPS_PROXY", "http://proxyuser:Pr0xyPassw0rd@proxy.example.org:3128", "Pr0xyPassw0rd", "proxy URL userinfo"),
    ("MLFLOW_TRACKING_URI", "https://mluser:Mlfl0wPw77@mlflow.example.org", "Mlfl0wPw77", "URL userinfo"),
    ("CI_JOB_JWT", JWT, JWT, "JWT"),
    ("SSHPASS", "ssh-Pa55-word", "ssh-Pa55-word", "plain password"),
    ("NETRC_PASS", "n3trcPassw0rd", "n3trcPassw0rd", "plain password"),
    ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCY1EXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCY1EXAMPLEKEY",
     "AWS secret key"),
    ("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLQ", "AKIAIOSFODNN7EXAMPLQ", "AWS key id"),
    ("GITHUB_TOKEN", "ghp_16C7e42F292c6912E7710c838347Ae178B4a", "ghp_16C7e42F292c6912E7710c838347Ae178B4a",
     "GitHub PAT"),
    ("HF_TOKEN", "hf_TsKpRwYzAbCdEfGhIjKlMnOpQrStUvWxYz", "hf_TsKpRwYzAbCdEfGhIjKlMnOpQrStUvWxYz", "Hugging Face token"),
    ("WANDB_API_KEY", "3f1c9a7e5b2d4c6a8e0f1b3d5c7a9e2f4b6d8c0a", "3f1c9a7e5b2d4c6a8e0f1b3d5c7a9e2f4b6d8c0a",
     "40 hex"),
    ("PGPASSWORD", "pgPw-2718", "pgPw-2718", "plain password"),
    ("http_proxy", "http://alice:LowerPr0xyPw@proxy.example.org:8080", "LowerPr0xyPw", "proxy URL userinfo"),
    ("NCCL_NET_PLUGIN_URL", "https://ncuser:NcclUrlPw42@plugins.example.org/nccl", "NcclUrlPw42",
     "URL userinfo under NCCL_*"),
    ("TORCH_HUB_HEADER", "Bearer tHuBbEaReRt0kEnAbCdEfGhIjKlMn", "tHuBbEaReRt0kEnAbCdEfGhIjKlMn", "Bearer under TORCH_*"),
    ("HOROVOD_RENDEZVOUS_ID", JWT[:-6] + "horovd", JWT[:-6] + "horovd", "JWT under HOROVOD_*"),
    ("UCX_REMOTE_ID", "AKIAJQ3EXAMPLEUCXKEY", "AKIAJQ3EXAMPLEUCXKEY", "AWS key id under UCX_*"),
    ("CUDA_CACHE_ID", "9fQ2xLr8Tz4Wm6Kp1Hs3Jd5Vb7Nc0Ga2Ye4Uo6Ii8", "9fQ2xLr8Tz4Wm6Kp1Hs3Jd5Vb7Nc0Ga2Ye4Uo6Ii8",
     "long random token under CUDA_*"),
    ("TORCH_HUB_GITLAB", "glpat-3N2kq_LpR9sYtZ-AbCdE", "glpat-3N2kq_LpR9sYtZ-AbCdE",
     "GitLab PAT with '-' under TORCH_*"),
    ("HOROVOD_NOTIFY_BOT", "xoxb-123456789012-1234567890123-kqzvhwbdmtlrpxnsgfjcyeau",
     "xoxb-123456789012-1234567890123-kqzvhwbdmtlrpxnsgfjcyeau", "Slack bot token (lower-case body) under HOROVOD_*"),
    ("NCCL_PLUGIN_HF", "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", "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",
     "Hugging Face token (letters only) under NCCL_*"),
    ("TF_VAR_db_admin", "Tf4dm1nPw", "Tf4dm1nPw", "Terraform variable under TF_* (plain password)"),
    ("SSH_PRIVATE_KEY", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
     "-----END OPENSSH PRIVATE KEY-----", "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ", "PEM"),
)


def environment() -> dict[str, str]:
    return {name: value for name, value, _, _ in CREDENTIALS}


def found(texts: dict[str, str]) -> dict[str, list[str]]:
    """Credential name -> the places (file or stream names) that hold its secret part."""
    return {name: [where for where, text in texts.items() if secret in text] for name, _, secret, _ in CREDENTIALS}


def read_tree(*roots: Path) -> dict[str, str]:
    """Every file under the folders, as text (undecodable bytes replaced), by path."""
    out = {}
    for root in roots:
        for p in sorted(Path(root).rglob("*")):
            if p.is_file():
                out[str(p)] = p.read_bytes().decode("utf-8", "replace")
    return out

"""The whole batch flow with openai-python: python3 examples/quickstart.py
(SPOOL_URL defaults to http://127.0.0.1:8080, where `npm start` serves)."""
import json
import os
import time

from openai import OpenAI

base = os.environ.get("SPOOL_URL", "http://127.0.0.1:8080")
client = OpenAI(base_url=f"{base}/v1", api_key="unused")

# The input: one request per line.
questions = ["Hello", "What is a batch?", "Say something short"]
with open("requests.jsonl", "w", encoding="utf-8") as handle:
    for index, content in enumerate(questions):
        line = {
            "custom_id": f"q{index + 1}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": "spool-tiny", "messages": [{"role": "user", "content": content}], "max_tokens": 16},
        }
        handle.write(json.dumps(line) + "\n")

with open("requests.jsonl", "rb") as handle:
    batch_input = client.files.create(file=handle, purpose="batch")
for file in client.files.list(limit=100):
    print(file.id, file.filename)

batch = client.batches.create(
    input_file_id=batch_input.id,
    endpoint="/v1/chat/completions",
    completion_window="unlimited",  # Spool's window: the job's SLA sets the deadline
    extra_body={"job_id": "job-demo"},  # the job reserved for your account
)
while batch.status not in ("completed", "failed", "expired", "cancelled"):
    time.sleep(0.5)
    batch = client.batches.retrieve(batch.id)
print(batch.status, batch.request_counts)
if batch.output_file_id:
    print(client.files.content(batch.output_file_id).text)
if batch.error_file_id:
    print(client.files.content(batch.error_file_id).text)
client.files.delete(batch_input.id)

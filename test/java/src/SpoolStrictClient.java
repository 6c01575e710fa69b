import com.openai.client.OpenAIClient;
import com.openai.client.okhttp.OpenAIOkHttpClient;
import com.openai.core.JsonValue;
import com.openai.core.http.HttpResponse;
import com.openai.models.batches.Batch;
import com.openai.models.batches.BatchCreateParams;
import com.openai.models.batches.BatchListPage;
import com.openai.models.batches.BatchListParams;
import com.openai.models.files.FileCreateParams;
import com.openai.models.files.FileDeleted;
import com.openai.models.files.FileListPage;
import com.openai.models.files.FileListParams;
import com.openai.models.files.FileObject;
import com.openai.models.files.FilePurpose;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * The official OpenAI Java SDK driving Spool's Files and Batches API end to end, with strict
 * response validation on: the client validates every answer it parses, and every object is
 * also validated explicitly. Arguments: the service's base URL, a reserved job id, a scratch
 * directory. On success it prints one JSON line of what it validated; any refusal by the SDK
 * ends it with a stack trace and a non-zero exit.
 */
public final class SpoolStrictClient {
  private final OpenAIClient client;
  private final String jobId;
  private final Path scratch;
  private final Map<String, Integer> validated = new LinkedHashMap<>();
  private final TreeSet<String> batchStates = new TreeSet<>();

  private SpoolStrictClient(String baseUrl, String jobId, Path scratch) {
    this.client = OpenAIOkHttpClient.builder()
        .baseUrl(baseUrl + "/v1")
        .apiKey("placeholder-not-used")
        .maxRetries(0)
        .timeout(Duration.ofSeconds(30))
        .responseValidation(true)
        .build();
    this.jobId = jobId;
    this.scratch = scratch;
  }

  public static void main(String[] args) throws Exception {
    if (args.length != 3) throw new IllegalArgumentException("usage: SpoolStrictClient <base-url> <job-id> <scratch-dir>");
    new SpoolStrictClient(args[0], args[1], Path.of(args[2])).run();
  }

  private void count(String what) {
    validated.merge(what, 1, Integer::sum);
  }

  private FileObject file(FileObject file) {
    file.validate();
    check(file.status() != null, "file.status() answers");
    count("file");
    return file;
  }

  private Batch batch(Batch batch) {
    batch.validate();
    batch.usage().orElseThrow().validate();
    batch.errors().ifPresent(Batch.Errors::validate);
    batchStates.add(batch.status().asString());
    count("batch");
    return batch;
  }

  private static void check(boolean condition, String what) {
    if (!condition) throw new AssertionError("expected: " + what);
  }

  private FileObject upload(String name, List<String> lines) throws Exception {
    Path path = scratch.resolve(name);
    Files.writeString(path, String.join("\n", lines) + "\n", StandardCharsets.UTF_8);
    return file(client.files().create(FileCreateParams.builder().file(path).purpose(FilePurpose.BATCH).build()));
  }

  private static String chat(String id, String text) {
    return "{\"custom_id\":\"" + id + "\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{\"model\":\"tiny-chat\",\"messages\":[{\"role\":\"user\",\"content\":\"" + text + "\"}]}}";
  }

  private static String embedding(String id, String text) {
    return "{\"custom_id\":\"" + id + "\",\"method\":\"POST\",\"url\":\"/v1/embeddings\",\"body\":{\"model\":\"tiny-chat\",\"input\":\"" + text + "\"}}";
  }

  private Batch create(String fileId, BatchCreateParams.Endpoint endpoint) {
    return batch(client.batches().create(BatchCreateParams.builder()
        .inputFileId(fileId)
        .endpoint(endpoint)
        .completionWindow(BatchCreateParams.CompletionWindow.of("unlimited"))
        .putAdditionalBodyProperty("job_id", JsonValue.from(jobId))
        .build()));
  }

  private Batch pollUntil(String batchId, String... states) throws InterruptedException {
    long deadline = System.currentTimeMillis() + 60_000;
    for (;;) {
      Batch current = batch(client.batches().retrieve(batchId));
      for (String state : states) if (current.status().asString().equals(state)) return current;
      if (System.currentTimeMillis() > deadline) throw new AssertionError(batchId + " is still " + current.status());
      Thread.sleep(50);
    }
  }

  private String content(String fileId) throws Exception {
    try (HttpResponse response = client.files().content(fileId); InputStream body = response.body()) {
      return new String(body.readAllBytes(), StandardCharsets.UTF_8);
    }
  }

  private List<String> listAllFiles(FileListParams params) {
    List<String> ids = new ArrayList<>();
    FileListPage page = client.files().list(params);
    for (;;) {
      page.response().validate();
      count("file_list");
      for (FileObject each : page.data()) ids.add(file(each).id());
      if (!page.hasNextPage()) return ids;
      page = page.nextPage();
    }
  }

  private List<String> listAllBatches(BatchListParams params) {
    List<String> ids = new ArrayList<>();
    BatchListPage page = client.batches().list(params);
    for (;;) {
      page.response().validate();
      count("batch_list");
      for (Batch each : page.data()) ids.add(batch(each).id());
      if (!page.hasNextPage()) return ids;
      page = page.nextPage();
    }
  }

  private void run() throws Exception {
    // An empty page, before anything is uploaded.
    check(listAllFiles(FileListParams.builder().purpose("batch_output").build()).isEmpty(), "no output files yet");

    List<String> chatLines = new ArrayList<>();
    for (int line = 1; line <= 6; line++) chatLines.add(chat("chat-" + line, line == 4 ? "refuse me [fail:400]" : "hello " + line));
    FileObject chatInput = upload("chat.jsonl", chatLines);
    check(file(client.files().retrieve(chatInput.id())).equals(chatInput), "retrieve answers what upload did");
    check(content(chatInput.id()).equals(String.join("\n", chatLines) + "\n"), "content answers the uploaded bytes");

    List<String> uploaded = new ArrayList<>(List.of(chatInput.id()));
    for (int index = 0; index < 4; index++) uploaded.add(upload("more-" + index + ".jsonl", List.of(chat("x" + index, "more " + index))).id());
    List<String> ascending = listAllFiles(FileListParams.builder().purpose("batch").limit(2L).order(FileListParams.Order.ASC).build());
    check(ascending.equals(uploaded), "paginated ascending list holds every upload in order: " + ascending);
    check(listAllFiles(FileListParams.builder().purpose("batch").limit(2L).after(uploaded.get(uploaded.size() - 1)).order(FileListParams.Order.ASC).build()).isEmpty(),
        "nothing after the newest file");

    // A chat batch with a line the engine refuses: completed, with an error file.
    Batch chat = create(chatInput.id(), BatchCreateParams.Endpoint.V1_CHAT_COMPLETIONS);
    check(chat.status().asString().equals("validating"), "a new batch is validating");
    Batch chatDone = pollUntil(chat.id(), "completed", "failed");
    check(chatDone.status().asString().equals("completed"), "chat batch completed");
    check(chatDone.requestCounts().orElseThrow().failed() == 1, "one failed line");
    check(chatDone.errors().orElseThrow().data().orElseThrow().size() == 1, "the failed line is listed");
    check(chatDone.usage().orElseThrow().inputTokens() > 0, "usage.input_tokens counted");
    file(client.files().retrieve(chatDone.outputFileId().orElseThrow()));
    file(client.files().retrieve(chatDone.errorFileId().orElseThrow()));
    check(content(chatDone.outputFileId().orElseThrow()).lines().count() == 5, "five output lines");

    // Embeddings.
    List<String> embeddingLines = new ArrayList<>();
    for (int line = 1; line <= 3; line++) embeddingLines.add(embedding("emb-" + line, "vector " + line));
    Batch embeddings = create(upload("embeddings.jsonl", embeddingLines).id(), BatchCreateParams.Endpoint.V1_EMBEDDINGS);
    Batch embeddingsDone = pollUntil(embeddings.id(), "completed", "failed");
    check(embeddingsDone.status().asString().equals("completed"), "embeddings batch completed");

    // A batch cancelled while its lines are slow.
    List<String> slowLines = new ArrayList<>();
    for (int line = 1; line <= 8; line++) slowLines.add(chat("slow-" + line, "slow [slow:400] " + line));
    Batch slow = create(upload("slow.jsonl", slowLines).id(), BatchCreateParams.Endpoint.V1_CHAT_COMPLETIONS);
    pollUntil(slow.id(), "in_progress");
    batch(client.batches().cancel(slow.id()));
    pollUntil(slow.id(), "cancelled");

    // A batch whose input breaks the rules: failed at validation, with its errors listed.
    Batch broken = create(upload("broken.jsonl", List.of(chat("dup", "a"), chat("dup", "b"))).id(), BatchCreateParams.Endpoint.V1_CHAT_COMPLETIONS);
    Batch brokenDone = pollUntil(broken.id(), "failed", "completed");
    check(brokenDone.status().asString().equals("failed"), "a duplicate custom_id fails the batch");

    List<String> batches = listAllBatches(BatchListParams.builder().limit(2L).build());
    check(batches.equals(List.of(broken.id(), slow.id(), embeddings.id(), chat.id())), "paginated batch list, newest first: " + batches);
    check(listAllBatches(BatchListParams.builder().after(chat.id()).build()).isEmpty(), "nothing after the oldest batch");

    FileDeleted deleted = client.files().delete(uploaded.get(1));
    deleted.validate();
    count("file_deleted");
    check(deleted.deleted() && deleted.id().equals(uploaded.get(1)), "delete answers the deleted id");

    StringBuilder out = new StringBuilder("{\"validated\":{");
    validated.forEach((key, value) -> out.append('"').append(key).append("\":").append(value).append(','));
    out.setLength(out.length() - 1);
    out.append("},\"batch_states\":[");
    for (String state : batchStates) out.append('"').append(state).append("\",");
    out.setLength(out.length() - 1);
    out.append("]}");
    System.out.println(out);
  }
}

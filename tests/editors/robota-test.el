;;; robota-test.el --- ERT tests of robota.el -*- lexical-binding: t -*-

;;; Commentary:

;; Run by tests/editors/test_emacs_client.py as
;;
;;   emacs --batch -Q -l editors/emacs/robota.el \
;;         -l tests/editors/robota-test.el -f ert-run-tests-batch-and-exit
;;
;; with ROBOTA_SOCKET naming a real robotad's socket and
;; ROBOTA_TEST_DAEMON_PID its pid.  Tests tagged `offline' need no daemon,
;; those tagged `daemon' talk to it, and the one tagged `full-turn' runs a
;; whole scripted turn through the session methods.  Waits are for a condition under an absolute deadline,
;; never a fixed sleep.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'robota)

(defconst robota-test--deadline 20
  "Absolute bound, in seconds, on any one wait for the daemon.")

(defun robota-test--wait-for (predicate what)
  "Process input until PREDICATE holds; fail naming WHAT past the deadline."
  (let ((deadline (+ (float-time) robota-test--deadline)))
    (while (and (not (funcall predicate)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (unless (funcall predicate)
      (ert-fail (format "timed out waiting for %s" what)))))

(defmacro robota-test--isolated (&rest body)
  "Run BODY with fresh robota state, closing any connection it opened."
  (declare (indent 0) (debug t))
  `(let ((robota--connection nil)
         (robota--server-info nil)
         (robota--sessions-by-root (make-hash-table :test #'equal))
         (robota--sessions-by-id (make-hash-table :test #'equal))
         (robota-display-output nil)
         (robota-event-functions nil))
     (unwind-protect (progn ,@body)
       (when robota--connection (robota-disconnect))
       (maphash (lambda (_id session)
                  (kill-buffer (robota--session-buffer session)))
                robota--sessions-by-id))))

(defun robota-test--error-of (thunk)
  "The error THUNK signals as a `jsonrpc-error', or nil when it returns."
  (condition-case err (progn (funcall thunk) nil)
    (jsonrpc-error err)))

(defun robota-test--buffer-text (session)
  "The text of SESSION's buffer, without properties."
  (with-current-buffer (robota--session-buffer session)
    (buffer-substring-no-properties (point-min) (point-max))))

(defun robota-test--text-has (session regexp)
  "Non-nil when SESSION's buffer text matches REGEXP."
  (string-match-p regexp (robota-test--buffer-text session)))

;;;; Offline: socket path, prompts, rendering, approvals

(ert-deftest robota-socket-path-follows-protocol-order ()
  "The option, then ROBOTA_SOCKET, XDG_RUNTIME_DIR and /tmp/robota-UID."
  :tags '(offline)
  (let ((process-environment (copy-sequence process-environment))
        (robota-socket-path nil))
    (setenv "ROBOTA_SOCKET" "/run/explicit.sock")
    (setenv "XDG_RUNTIME_DIR" "/run/user/42")
    (should (equal (robota-resolve-socket-path) "/run/explicit.sock"))
    (let ((robota-socket-path "/srv/option.sock"))
      (should (equal (robota-resolve-socket-path) "/srv/option.sock")))
    (setenv "ROBOTA_SOCKET" "")
    (should (equal (robota-resolve-socket-path)
                   "/run/user/42/robota/robotad.sock"))
    (setenv "ROBOTA_SOCKET" nil)
    (setenv "XDG_RUNTIME_DIR" nil)
    (should (equal (robota-resolve-socket-path)
                   (format "/tmp/robota-%d/robotad.sock" (user-real-uid))))))

(ert-deftest robota-missing-daemon-is-a-user-error ()
  "Connecting where no daemon listens is a `user-error' naming the socket."
  :tags '(offline)
  (robota-test--isolated
    (let* ((robota-socket-path
            (expand-file-name "absent.sock" (make-temp-file "robota" t)))
           (err (should-error (robota-connection) :type 'user-error)))
      (should (string-match-p (regexp-quote robota-socket-path) (cadr err)))
      ;; The OS's reason, not `make-network-process' arguments.
      (should (string-match-p "(No such file or directory)" (cadr err)))
      (should-not (string-match-p ":family" (cadr err)))
      (should-not robota--connection))))

(ert-deftest robota-region-prompt-quotes-file-and-lines ()
  "A region is quoted with its file, its lines and a fence it cannot close."
  :tags '(offline)
  (let* ((root (make-temp-file "robota-project" t))
         (robota-project-root-function (lambda () root))
         (file (expand-file-name "src/a.py" root)))
    (make-directory (file-name-directory file))
    (with-temp-buffer
      (insert "one\ntwo ``` three\nfour\n")
      (setq buffer-file-name file)
      (let ((prompt (robota--region-prompt (point-min) (point-max) "Explain")))
        (setq buffer-file-name nil)
        (should (equal prompt
                       (concat "Explain\n\nFrom src/a.py (lines 1-3):\n"
                               "````\none\ntwo ``` three\nfour\n````\n")))))))

(defun robota-test--offline-session (root)
  "Register a session for ROOT without a daemon, as `session/create' would.
It counts as subscribed on the connection `robota-test--offline' fakes."
  (let ((session (robota--register root "s-offline")))
    (setf (robota--session-connection session) 'offline)
    session))

(defmacro robota-test--offline (pending &rest body)
  "Run BODY with `robota--call' faked, recording its calls in `calls'.
`session/pending' is answered with PENDING (a plist or nil), and the
connection is the fake one of `robota-test--offline-session'."
  (declare (indent 1) (debug t))
  `(let ((calls nil))
     (cl-letf (((symbol-function 'robota-connection) (lambda () 'offline))
               ((symbol-function 'robota--call)
                (lambda (method params &rest keys)
                  (push (cons method params) calls)
                  (when (eq method 'session/pending)
                    (funcall (plist-get keys :on-result)
                             (list :pending ,pending))))))
       ,@body)))

(defun robota-test--calls-of (method calls)
  "The parameters of the CALLS of METHOD, oldest first."
  (mapcar #'cdr (reverse (cl-remove-if-not
                          (lambda (call) (eq (car call) method)) calls))))

(defun robota-test--event (seq type &rest members)
  "An event of the offline session: SEQ, TYPE and MEMBERS."
  (append (list :sessionId "s-offline" :seq seq :turnId "t1" :type type)
          members))

(ert-deftest robota-events-render-once-in-order ()
  "Events stream into the project buffer; a replayed seq is dropped."
  :tags '(offline)
  (robota-test--isolated
    (let* ((session (robota-test--offline-session "/tmp/robota-demo"))
           (seen nil)
           (robota-event-functions
            (list (lambda (id event)
                    (push (cons id (plist-get event :seq)) seen)))))
      (dolist (event
               (list (robota-test--event 1 "turn_started" :prompt "write it")
                     (robota-test--event 2 "text_delta" :text "On ")
                     (robota-test--event 3 "text_delta" :text "it.")
                     (robota-test--event 3 "text_delta" :text "it.")
                     (robota-test--event 4 "tool_started" :callId "c"
                                         :tool "Write"
                                         :arguments '(:file_path "x.txt"))
                     (robota-test--event 5 "permission_decided" :callId "c"
                                         :tool "Write" :decision "deny"
                                         :reason "outside cwd")
                     (robota-test--event 6 "tool_finished" :callId "c"
                                         :tool "Write" :ok :json-false
                                         :preview "denied\nby rule")
                     (robota-test--event 7 "context_updated" :phase "exact"
                                         :usedTokens 5 :maxTokens 100
                                         :usedPercentage 5.0
                                         :remainingPercentage 95.0)
                     (robota-test--event 8 "turn_finished" :status "failed"
                                         :error '(:code -32007
                                                  :message "boom"))))
        (robota--handle-event event))
      (should (equal (buffer-name (robota--session-buffer session))
                     "*robota: robota-demo*"))
      (should (equal (robota-test--buffer-text session)
                     (concat "── session s-offline in /tmp/robota-demo ──\n"
                             "\n> write it\n"
                             "On it.\n"
                             "⚙ Write {\"file_path\":\"x.txt\"}\n"
                             "  deny Write: outside cwd\n"
                             "  ✗ denied by rule\n"
                             "✗ turn failed: boom\n")))
      (should (equal (reverse seen)
                     (mapcar (lambda (seq) (cons "s-offline" seq))
                             '(1 2 3 4 5 6 7 8))))
      (should (eq (robota--session-state session) 'idle))
      (should (equal (plist-get (robota--session-context session) :usedTokens)
                     5)))))

(defconst robota-test--requests
  (vector (list :requestId "r1" :executionId "e1" :tool "Write"
                :arguments '(:file_path "a.txt" :content "hi")
                :reason "Write needs approval")
          (list :requestId "r2" :executionId "e1" :tool "Bash"
                :arguments '(:command "rm -r build")
                :reason "Bash needs approval"))
  "Two approval requests of one execution.")

(ert-deftest robota-approvals-ask-each-request-and-resume-once ()
  "Each request is asked with its tool and arguments; one resume answers."
  :tags '(offline)
  (robota-test--isolated
    (robota-test--offline-session "/tmp/robota-demo")
    (let ((questions nil))
      (robota-test--offline (list :executionId "e1"
                                  :requests robota-test--requests)
        (cl-letf (((symbol-function 'y-or-n-p)
                   (lambda (prompt)
                     (push prompt questions)
                     (string-match-p "Write" prompt))))
          (robota--handle-event
           (robota-test--event 1 "approval_requested" :executionId "e1"
                               :requests robota-test--requests))
          (robota-test--wait-for
           (lambda () (robota-test--calls-of 'session/resume calls))
           "the resume call")
          ;; The same execution replayed later is not asked about again.
          (robota--handle-event
           (robota-test--event 2 "approval_requested" :executionId "e1"
                               :requests robota-test--requests))
          (accept-process-output nil 0.05))
        (should (equal (reverse questions)
                       (list (concat "Allow robota to run Write "
                                     "{\"file_path\":\"a.txt\","
                                     "\"content\":\"hi\"}"
                                     " (Write needs approval)? ")
                             (concat "Allow robota to run Bash "
                                     "{\"command\":\"rm -r build\"}"
                                     " (Bash needs approval)? "))))
        (should (= (length (robota-test--calls-of 'session/resume calls)) 1))
        (let* ((params (car (robota-test--calls-of 'session/resume calls)))
               (responses (append (plist-get params :responses) nil))
               (ids (mapcar (lambda (r) (plist-get r :responseId))
                            responses)))
          (should (equal (plist-get params :sessionId) "s-offline"))
          (should (equal (plist-get params :executionId) "e1"))
          (should (equal (mapcar (lambda (r) (plist-get r :requestId))
                                 responses)
                         '("r1" "r2")))
          (should (equal (mapcar (lambda (r) (plist-get r :approved))
                                 responses)
                         '(t :json-false)))
          (should (cl-every (lambda (id)
                              (string-match-p "\\`[0-9a-f-]\\{36\\}\\'" id))
                            ids))
          (should-not (equal (car ids) (cadr ids))))))))

(ert-deftest robota-approval-shows-the-whole-command-exactly ()
  "An approval shows a long command whole, and what could hide in it.
It was cut at `robota-preview-width' (100 characters), so a command
whose 101st character began \"; rm -rf ~\" was approved unseen; a bidi
override, a zero-width space, an escape and a no-break space are shown
by name; a file's content beyond `robota-approval-value-width' is cut,
saying how much."
  :tags '(offline)
  (let* ((command (concat (make-string 120 ?a) "; rm -rf ~ \u202eevil"
                          " exa\u200bmple.com a\u00a0b"))
         (robota-approval-value-width 10)
         (prompt nil)
         (request (list :requestId "r1" :executionId "e1"
                        :tool "Bash\e[2J"
                        :arguments (list :command command
                                         :content (make-string 15 ?x))
                        :reason "Bash needs\rapproval")))
    (cl-letf (((symbol-function 'y-or-n-p)
               (lambda (question) (setq prompt question) t)))
      (should (robota-ask-approval request)))
    (should (equal prompt
                   (concat "Allow robota to run Bash^[[2J {\"command\":\""
                           (make-string 120 ?a)
                           "; rm -rf ~ <U+202E>evil exa<U+200B>mple.com"
                           " a<U+00A0>b\",\"content\":\"xxxxxxxxxx… (5 more"
                           " characters)\"} (Bash needs^Mapproval)? ")))))

(ert-deftest robota-replayed-approval-no-longer-waiting-is-not-asked ()
  "A replayed request robotad no longer waits on is shown, never asked."
  :tags '(offline)
  (robota-test--isolated
    (let ((session (robota-test--offline-session "/tmp/robota-demo"))
          (asked nil))
      (robota-test--offline nil
        (cl-letf (((symbol-function 'y-or-n-p)
                   (lambda (_prompt) (setq asked t))))
          (robota--handle-event
           (robota-test--event 1 "approval_requested" :executionId "e1"
                               :requests robota-test--requests))
          (accept-process-output nil 0.05))
        (should (robota-test--calls-of 'session/pending calls))
        (should-not (robota-test--calls-of 'session/resume calls)))
      (should-not asked)
      (should (string-match-p "  \\? Write"
                              (robota-test--buffer-text session))))))

(ert-deftest robota-a-killed-buffer-is-made-anew-for-the-next-turn ()
  "After its buffer is killed, a session's next prompt shows in a new one."
  :tags '(offline)
  (robota-test--isolated
    (let* ((root (make-temp-file "robota-killed" t))
           (session (robota-test--offline-session root))
           (robota-project-root-function (lambda () root)))
      (kill-buffer (robota--session-buffer session))
      (robota-test--offline nil
        (robota-send-prompt "again")
        (should (robota-test--calls-of 'session/run calls)))
      (robota--handle-event (robota-test--event 1 "turn_started"
                                                :prompt "again"))
      (robota--handle-event (robota-test--event 2 "text_delta" :text "Hi."))
      (should (buffer-live-p (robota--session-buffer session)))
      (should (equal (robota-test--buffer-text session)
                     (format "── session s-offline in %s ──\n\n> again\nHi."
                             root)))
      (kill-buffer (robota--session-buffer session))
      (with-temp-buffer
        (robota-switch-to-buffer)
        (should (eq (current-buffer) (robota--session-buffer session)))))))

(ert-deftest robota-answer-to-a-closed-connection-is-said-lost ()
  "An answer that cannot be sent says so and how to give it again."
  :tags '(offline)
  (robota-test--isolated
    (let ((session (robota-test--offline-session "/tmp/robota-demo"))
          (robota-approval-function (lambda (_request) t))
          (messages nil))
      (cl-letf (((symbol-function 'robota-connection) (lambda () 'offline))
                ((symbol-function 'robota--call)
                 (lambda (&rest _)
                   (error "Process robota no longer connected to pipe")))
                ((symbol-function 'message)
                 (lambda (format &rest args)
                   (push (apply #'format-message format args) messages))))
        (robota--answer-approvals session "e1" robota-test--requests))
      (let ((text (robota-test--buffer-text session)))
        (should (string-match-p "not delivered.*no longer connected" text))
        (should (string-match-p "M-x robota-review-pending" text)))
      (should (cl-some (lambda (m) (string-match-p "not delivered" m))
                       messages))
      (should (eq (robota--session-state session) 'waiting))
      (should-not (robota--session-asked session)))))

(ert-deftest robota-events-lost-are-said-and-the-rest-replayed ()
  "A -32012 answer names the lost events and replays those robotad holds."
  :tags '(offline)
  (robota-test--isolated
    (let ((session (robota-test--offline-session "/tmp/robota-demo"))
          (subscribes nil))
      (setf (robota--session-last-seq session) 10
            (robota--session-connection session) nil)
      (cl-letf (((symbol-function 'robota-connection) (lambda () 'offline))
                ((symbol-function 'robota--call)
                 (lambda (_method params &rest keys)
                   (push params subscribes)
                   (if (= (length subscribes) 1)
                       (funcall (plist-get keys :on-error)
                                (list :code -32012 :message "events lost"
                                      :data (list :sessionId "s-offline"
                                                  :oldestSeq 50)))
                     (funcall (plist-get keys :on-result)
                              (list :latestSeq 60))))))
        (robota--subscribe session nil))
      (should (equal (mapcar (lambda (p) (plist-get p :afterSeq))
                             (reverse subscribes))
                     '(10 49)))
      (should (robota-test--text-has
               session "^\\[events 11 to 49 are lost: robotad no longer holds them\\]$"))
      (should (= (robota--session-last-seq session) 49))
      (should (eq (robota--session-connection session) 'offline)))))

(ert-deftest robota-lost-connection-leaves-the-outcome-unknown ()
  "A connection closing under a running turn says its outcome is unknown."
  :tags '(offline)
  (robota-test--isolated
    (let ((session (robota-test--offline-session "/tmp/robota-demo")))
      (robota--handle-event (robota-test--event 1 "turn_started" :prompt "go"))
      (robota--handle-event (robota-test--event 2 "text_delta" :text "half"))
      (robota--connection-closed 'offline)
      (should (robota-test--text-has
               session
               (concat "^half\n\\[connection to robotad closed; the turn's "
                       "outcome is unknown until reconnecting: "
                       "`M-x robota-status'\\]\n\\'")))
      (should-not (robota--session-connection session)))))

(ert-deftest robota-failed-request-never-splits-streamed-text ()
  "A request's failure shows above the line being streamed, not inside it."
  :tags '(offline)
  (robota-test--isolated
    (let ((session (robota-test--offline-session "/tmp/robota-demo")))
      (robota--handle-event (robota-test--event 1 "turn_started" :prompt "go"))
      (robota--handle-event (robota-test--event 2 "text_delta" :text "slo"))
      (let ((inhibit-message t))
        (robota--report-error session 'session/run
                              (list :code -32001 :message "busy")))
      (robota--handle-event (robota-test--event 3 "text_delta" :text "w reply"))
      (should (robota-test--text-has
               session
               (concat "^> go\n✗ session/run failed: busy "
                       "(a turn is running: `robota-abort')\n"
                       "slow reply\\'"))))))

;;;; Against the live daemon

(ert-deftest robota-initialize-handshake ()
  "Connecting sends `initialize'; robotad answers protocol 1 and framings."
  :tags '(daemon)
  (robota-test--isolated
    (robota-connection)
    (robota-test--wait-for (lambda () robota--server-info)
                           "the initialize answer")
    (let ((explicit (robota-request
                     'initialize
                     '(:clientInfo (:name "robota-test" :version "1")))))
      (dolist (info (list robota--server-info explicit))
        (should (equal (plist-get info :protocolVersion) 1))
        (should (equal (plist-get (plist-get info :serverInfo) :name)
                       "robotad"))
        (should (member "content-length"
                        (append (plist-get (plist-get info :capabilities)
                                           :framings)
                                nil)))))))

(ert-deftest robota-daemon-status-names-this-daemon ()
  "`daemon/status' over the resolved socket names this daemon's pid and path."
  :tags '(daemon)
  (robota-test--isolated
    (let ((status (robota-request 'daemon/status)))
      (should (equal (plist-get status :pid)
                     (string-to-number (getenv "ROBOTA_TEST_DAEMON_PID"))))
      (should (equal (plist-get status :socketPath)
                     (robota-resolve-socket-path)))
      (should (equal (plist-get status :protocolVersion) 1))
      (should (integerp (plist-get (plist-get status :sessions) :loaded))))))

(ert-deftest robota-status-command-reports-daemon ()
  "`robota-status' answers asynchronously with the daemon's pid."
  :tags '(daemon)
  (robota-test--isolated
    (let* ((root (make-temp-file "robota-status" t))
           (robota-project-root-function (lambda () root))
           (messages nil)
           (status-line
            (lambda ()
              (cl-find-if (lambda (m) (string-prefix-p "robotad " m))
                          messages))))
      (cl-letf (((symbol-function 'message)
                 (lambda (format &rest args)
                   (push (apply #'format-message format args) messages))))
        (robota-status)
        (robota-test--wait-for status-line "the status message"))
      (should (string-match-p
               (format "(pid %s, protocol 1)"
                       (getenv "ROBOTA_TEST_DAEMON_PID"))
               (funcall status-line)))
      (should (string-suffix-p "| no session for this project"
                               (funcall status-line))))))

(ert-deftest robota-errors-carry-code-and-utf8-data ()
  "An unknown method is -32601 with its non-ASCII name echoed intact."
  :tags '(daemon)
  (robota-test--isolated
    (let* ((name "robota/naïve✓")
           (err (robota-test--error-of
                 (lambda () (robota-request (intern name))))))
      (should err)
      (should (equal (robota-error-code err) -32601))
      (should (equal (plist-get (alist-get 'jsonrpc-error-data (cdr err))
                                :method)
                     name))
      ;; The connection survives a failed request.
      (should (robota-request 'daemon/status)))))

(ert-deftest robota-reconnects-after-close ()
  "A closed connection is replaced by a fresh one on the next use."
  :tags '(daemon)
  (robota-test--isolated
    (let ((first (robota-connection)))
      (robota-disconnect)
      (should-not (jsonrpc-running-p first))
      (let ((second (robota-connection)))
        (should-not (eq first second))
        (should (jsonrpc-running-p second))
        (should (robota-request 'daemon/status))))))

;;;; Sessions across connections (need the session methods)

(defconst robota-test--write-script
  (vector '(:text "Let me write." :toolCalls [(:name "Write"
                                               :arguments
                                               (:file_path "w.txt"
                                                :content "hi"))])
          '(:text "Done writing."))
  "The scripted provider's steps: a Write needing approval, then a reply.")

(ert-deftest robota-review-after-reconnecting-shows-the-rest-of-the-turn ()
  "An approval answered on a new connection shows the turn it resumes."
  :tags '(daemon)
  (robota-test--isolated
    (let* ((root (make-temp-file "robota-review" t))
           (robota-project-root-function (lambda () root))
           (robota-session-parameters
            (list :provider "scripted" :script robota-test--write-script))
           (asked 0)
           (robota-approval-function
            (lambda (_request) (cl-incf asked) (signal 'quit nil))))
      (robota-send-prompt "write it")
      (robota-test--wait-for (lambda () (= asked 1)) "the first question")
      (let ((session (gethash root robota--sessions-by-root)))
        (robota-test--wait-for
         (lambda () (robota-test--text-has session "waiting for approval"))
         "the waiting turn")
        ;; robotad restarts: the connection goes, and the seqs seen here
        ;; lie beyond the last one the new process published.  The answer
        ;; travels on a new connection, which must be subscribed first.
        (robota-disconnect)
        (setf (robota--session-last-seq session) 100000)
        (setq robota-approval-function (lambda (_request) t))
        (robota-review-pending)
        (robota-test--wait-for
         (lambda () (robota-test--text-has session "Done writing\\."))
         "the rest of the turn in the buffer")
        (should (robota-test--text-has session "\\[robotad restarted"))
        (should (file-exists-p (expand-file-name "w.txt" root)))))))

;; Both are Writes needing approval, in two rounds of one turn: robotad
;; parks the same execution twice, with a new request the second time.
(defconst robota-test--two-writes-script
  (vector '(:toolCalls [(:name "Write" :arguments (:file_path "a.txt"
                                                   :content "a"))])
          '(:toolCalls [(:name "Write" :arguments (:file_path "b.txt"
                                                   :content "b"))])
          '(:text "Both written."))
  "The scripted provider's steps: two Writes in turn, then a reply.")

(ert-deftest robota-each-round-of-one-execution-is-asked ()
  "A turn asking again after an approval is asked again, not left parked."
  :tags '(daemon)
  (robota-test--isolated
    (let* ((root (make-temp-file "robota-rounds" t))
           (robota-project-root-function (lambda () root))
           (robota-session-parameters
            (list :provider "scripted" :script robota-test--two-writes-script))
           (questions nil)
           (robota-approval-function
            (lambda (request)
              (push (file-name-nondirectory
                     (plist-get (plist-get request :arguments) :file_path))
                    questions)
              t)))
      (robota-send-prompt "write both")
      (robota-test--wait-for (lambda () (robota-session-id root)) "the session")
      (let ((session (gethash root robota--sessions-by-root)))
        (robota-test--wait-for
         (lambda () (robota-test--text-has session "Both written\\."))
         "the reply after both approvals")
        (should (equal (reverse questions) '("a.txt" "b.txt")))
        (should (file-exists-p (expand-file-name "b.txt" root)))))))

(ert-deftest robota-attach-replays-and-asks-the-waiting-approval ()
  "Attaching replays the session's events and asks what it waits for."
  :tags '(daemon)
  (robota-test--isolated
    (let* ((root (make-temp-file "robota-attach" t))
           (robota-project-root-function (lambda () root))
           (questions nil)
           (robota-approval-function
            (lambda (request) (push (plist-get request :tool) questions) t))
           (id (plist-get (robota-request
                           'session/create
                           (list :cwd root :provider "scripted"
                                 :script robota-test--write-script))
                          :sessionId)))
      ;; Another client runs the turn up to its approval, then goes.
      (should (equal (plist-get (robota-request
                                 'session/run
                                 (list :sessionId id :prompt "write it"))
                                :status)
                     "waiting"))
      (robota-disconnect)
      (robota-attach-session id)
      (let ((session (gethash root robota--sessions-by-root)))
        (robota-test--wait-for
         (lambda () (robota-test--text-has session "Done writing\\."))
         "the approved turn's reply")
        (should (equal questions '("Write")))
        (should (robota-test--text-has session "> write it\nLet me write\\."))
        (should (file-exists-p (expand-file-name "w.txt" root)))))))

(ert-deftest robota-attach-to-an-unknown-id-is-a-user-error ()
  "Attaching to an id robotad does not know binds nothing, creates nothing."
  :tags '(daemon)
  (robota-test--isolated
    (let* ((root (make-temp-file "robota-attach" t))
           (robota-project-root-function (lambda () root))
           (before (length (plist-get (robota-request 'session/list)
                                      :sessions)))
           (err (should-error (robota-attach-session "nosuchid")
                              :type 'user-error)))
      (should (equal (cadr err) "No session nosuchid"))
      (should-not (robota-session-id root))
      (accept-process-output nil 0.2)
      (should (= (length (plist-get (robota-request 'session/list) :sessions))
                 before)))))

;; Another client answers while this Emacs still asks: the question ends.
(ert-deftest robota-an-approval-answered-elsewhere-ends-the-question ()
  "A question another client answered ends; nothing more is sent."
  :tags '(daemon)
  (robota-test--isolated
    (let* ((root (make-temp-file "robota-elsewhere" t))
           (robota-project-root-function (lambda () root))
           (id (plist-get (robota-request
                           'session/create
                           (list :cwd root :provider "scripted"
                                 :script robota-test--write-script))
                          :sessionId))
           (other nil)
           (asked 0)
           (returned nil)
           (robota-approval-function
            (lambda (request)
              (cl-incf asked)
              ;; The other client, say a second Emacs, denies it...
              (setq other (robota--connect (robota-resolve-socket-path)))
              (jsonrpc-async-request
               other 'session/resume
               (list :sessionId id
                     :executionId (plist-get request :executionId)
                     :responses
                     (vector (list :requestId (plist-get request :requestId)
                                   :responseId "answer-from-elsewhere"
                                   :approved :json-false)))
               :success-fn #'ignore :error-fn #'ignore)
              ;; ...while the person here has not answered yet.
              (let ((deadline (+ (float-time) robota-test--deadline)))
                (while (< (float-time) deadline)
                  (accept-process-output nil 0.05)))
              (setq returned t)
              t)))
      (unwind-protect
          (progn
            (should (equal (plist-get (robota-request
                                       'session/run
                                       (list :sessionId id :prompt "write"))
                                      :status)
                           "waiting"))
            (robota-attach-session id)
            (let ((session (gethash root robota--sessions-by-root)))
              (robota-test--wait-for
               (lambda ()
                 (robota-test--text-has session "\\[answered elsewhere\\]"))
               "the question to end")
              (robota-test--wait-for
               (lambda () (robota-test--text-has session "Done writing\\."))
               "the turn's reply")
              (should (= asked 1))
              (should-not returned)
              (should-not (robota-test--text-has session "not delivered"))
              (should-not (file-exists-p (expand-file-name "w.txt" root)))))
        (when other (jsonrpc-shutdown other))))))

(ert-deftest robota-attach-to-a-malformed-id-is-a-user-error ()
  "An id robotad refuses as malformed is a `user-error' with its reason."
  :tags '(daemon)
  (robota-test--isolated
    (let* ((root (make-temp-file "robota-attach" t))
           (robota-project-root-function (lambda () root))
           (err (should-error (robota-attach-session "../x")
                              :type 'user-error)))
      (should (string-prefix-p "Cannot attach to session ../x: " (cadr err)))
      (should-not (robota-session-id root)))))

;;;; The full turn (needs the session methods)

(defun robota-test--of-type (type events)
  "The members of EVENTS whose type is TYPE."
  (cl-remove-if-not (lambda (e) (equal (plist-get e :type) type)) events))

(defun robota-test--reply-finished (events response)
  "Non-nil when EVENTS hold a completed `turn_finished' with RESPONSE."
  (cl-some (lambda (e) (and (equal (plist-get e :status) "completed")
                            (equal (plist-get e :response) response)))
           (robota-test--of-type "turn_finished" events)))

(defconst robota-test--script
  (vector '(:text "hello" :chunks 2)
          '(:toolCalls [(:name "Write"
                         :arguments (:file_path "out.txt" :content "hi"))])
          '(:text "done"))
  "The scripted provider's steps: a reply, a Write, then a reply.")

(ert-deftest robota-full-turn-streams-and-approves ()
  "Two scripted turns: streamed text, then a Write approved by `y-or-n-p'."
  :tags '(daemon full-turn)
  (robota-test--isolated
    (let* ((root (make-temp-file "robota-turn" t))
           (robota-project-root-function (lambda () root))
           (probe (robota-test--error-of
                   (lambda ()
                     (robota-request 'session/create (list :cwd root))))))
      (should-not probe)
      (let* ((robota-session-parameters
              (list :provider "scripted" :script robota-test--script))
             (events nil)
             (robota-event-functions
              (list (lambda (_id event)
                      (setq events (append events (list event))))))
             (questions nil))
        (robota-start-session)
        (robota-test--wait-for (lambda () (robota-session-id root))
                               "the new session")
        (robota-send-prompt "say hello")
        (robota-test--wait-for
         (lambda () (robota-test--reply-finished events "hello"))
         "the first reply")
        (cl-letf (((symbol-function 'y-or-n-p)
                   (lambda (prompt) (push prompt questions) t)))
          (robota-send-prompt "write the file")
          (robota-test--wait-for
           (lambda () (robota-test--reply-finished events "done"))
           "the reply after the approval"))
        (let* ((session-id (robota-session-id root))
               (first-turn (plist-get (car events) :turnId))
               (deltas (robota-test--of-type "text_delta" events))
               (first-deltas (cl-remove-if-not
                              (lambda (e)
                                (equal (plist-get e :turnId) first-turn))
                              deltas))
               (text (robota-test--buffer-text
                      (gethash root robota--sessions-by-root))))
          (should (cl-every (lambda (e)
                              (equal (plist-get e :sessionId) session-id))
                            events))
          (should (= (length first-deltas) 2))
          (should (equal (mapconcat (lambda (e) (plist-get e :text))
                                    deltas "")
                         "hellodone"))
          (should (= (length questions) 1))
          (should (string-match-p "Write .*out\\.txt.*hi" (car questions)))
          (should (robota-test--of-type "approval_resolved" events))
          (should (equal (with-temp-buffer
                           (insert-file-contents
                            (expand-file-name "out.txt" root))
                           (buffer-string))
                         "hi"))
          (should (string-match-p "> say hello\nhello\n" text))
          (should (string-match-p "⚙ Write" text))
          (should (string-match-p "done\n\\'" text)))))))

(provide 'robota-test)
;;; robota-test.el ends here
